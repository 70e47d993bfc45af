#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for gpuheal's tests: etcd and kube-apiserver (plus
# kube-controller-manager and kube-scheduler with --with-controllers), built from Go modules by
# scripts/build-control-plane.sh. TLS everywhere except etcd on loopback; RBAC; a service-account
# issuer and signing key so TokenRequest works; an admin kubeconfig with client certificates.
#
#   control-plane.sh up [--with-controllers] [--with-node] [--with-karpenter] [--with-capi] [--dir DIR] [--apiserver-arg ARG]... [--client-qps N] [--log-v N]
#                                       prints KUBECONFIG=<path> last; etcd's URL is in DIR/etcd.url
#                                       --with-node: also this machine as a real node (implies
#                                       --with-controllers; scripts/real-node.sh): containerd, runc,
#                                       CNI and a kubelet; the API server runs the Node authorizer
#                                       and NodeRestriction; prints NODE=, HELM= and PAUSE_IMAGE=
#                                       before KUBECONFIG=
#                                       --client-qps: kube-controller-manager's and kube-scheduler's
#                                       client limits (N requests/s, bursts of 2N) instead of the
#                                       upstream defaults (20 and 50/s), as a cluster of thousands of
#                                       nodes is run (gpuheal drill uses 200)
#                                       --log-v: kube-controller-manager's and kube-scheduler's log
#                                       verbosity (their -v; 3 logs each scheduling attempt and why
#                                       a pod did not fit); logs in DIR/<component>.log
#                                       --with-karpenter: also Karpenter's controller with its kwok
#                                       cloud provider (scripts/build-peer.sh karpenter; implies
#                                       --with-controllers): its CRDs, a KWOKNodeClass "gpu" whose
#                                       instances are 8-GPU machines
#                                       (tools/peers/karpenter/instance-types.json) and a NodePool
#                                       "gpu" (label gpuheal.io/pool=gpu); prints KARPENTER_VERSION=
#                                       before KUBECONFIG=. Its Nodes have no kubelet: `gpuheal sim
#                                       --adopt karpenter.sh/nodepool` plays it
#                                       --with-capi: also Cluster API's core manager and its docker
#                                       infrastructure provider (scripts/build-peer.sh capi; implies
#                                       --with-controllers): their CRDs, served through their
#                                       conversion webhooks, and their admission webhooks, all on
#                                       127.0.0.1 with a certificate of the test CA; prints
#                                       CAPI_VERSION= before KUBECONFIG=. Machines of the
#                                       provider's inMemory backend have no kubelet: the drill's
#                                       simulated kubelets register their Nodes
#   control-plane.sh down [--dir DIR] [--keep-logs]
#                                       stops exactly what `up` started (by pid) and removes DIR;
#                                       without --dir, the last one `up` started without --dir;
#                                       --keep-logs: removes all of DIR but the components' *.log
#   control-plane.sh stop-apiserver --dir DIR    an API server outage, for tests...
#   control-plane.sh start-apiserver --dir DIR   ...and its end (same flags, same port; waits for /readyz)
#
# Several control planes can run at once in different directories.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
shift || true
dir=""
with_controllers=0
with_node=0
with_karpenter=0
with_capi=0
apiserver_args=()
client_qps=""
log_v=""
keep_logs=0
last_file=${XDG_CACHE_HOME:-$HOME/.cache}/gpuheal/control-plane.last
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --with-controllers) with_controllers=1; shift ;;
    --with-node) with_node=1; with_controllers=1; shift ;;
    --with-karpenter) with_karpenter=1; with_controllers=1; shift ;;
    --with-capi) with_capi=1; with_controllers=1; shift ;;
    --keep-logs) keep_logs=1; shift ;;
    --apiserver-arg) apiserver_args+=("$2"); shift 2 ;;
    --apiserver-arg=*) apiserver_args+=("${1#*=}"); shift ;;
    --client-qps)
      client_qps=${2:-}
      [[ $client_qps =~ ^[1-9][0-9]*$ ]] || { echo "control-plane.sh: --client-qps wants a whole number of requests per second, got '$client_qps'" >&2; exit 2; }
      shift 2 ;;
    --log-v)
      log_v=${2:-}
      [[ $log_v =~ ^[0-9]$ ]] || { echo "control-plane.sh: --log-v wants a log verbosity 0..9, got '$log_v'" >&2; exit 2; }
      shift 2 ;;
    *) echo "control-plane.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { echo "control-plane: $*" >&2; }

# Below the kernel's ephemeral range: a port in it can be taken as the source port of any outgoing
# connection between this choice and the component's bind ("address already in use": a scheduler
# failed to start that way).
# shellcheck source=free-port.sh
source "$root/scripts/free-port.sh"

stop_all() {
  local d=$1
  [[ -f $d/pids ]] || return 0
  # Reverse start order: clients before the API server, the API server before etcd.
  local pids
  pids=$(tac "$d/pids" | awk '{print $2}')
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    local alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -f "$d/pids"
}

# start NAME CMD...: runs in the background with its log in $dir/NAME.log, records its pid.
start() {
  local name=$1
  shift
  "$@" > "$dir/$name.log" 2>&1 &
  echo "$name $!" >> "$dir/pids"
}

# wait_for NAME SECONDS CMD...: retries CMD until it succeeds; dumps NAME's log on failure.
wait_for() {
  local name=$1 seconds=$2
  shift 2
  local deadline=$(( $(date +%s) + seconds ))
  until "$@" >/dev/null 2>&1; do
    if (( $(date +%s) > deadline )); then
      log "$name did not become ready in ${seconds}s; its log:"
      tail -n 40 "$dir/$name.log" >&2 || true
      stop_all "$dir"
      exit 1
    fi
    sleep 0.2
  done
}

# shellcheck source=pki.sh
source "$root/scripts/pki.sh"

case $cmd in
  up)
    bin=$(bash "$root/scripts/build-control-plane.sh")
    if [[ -z $dir ]]; then
      dir=$(mktemp -d /tmp/gpuheal-cp-XXXXXX)
      mkdir -p "$(dirname "$last_file")" && echo "$dir" > "$last_file"
    fi
    mkdir -p "$dir/pki" "$dir/etcd"
    dir=$(cd "$dir" && pwd)
    : > "$dir/ports"
    trap 'stop_all "$dir"' ERR

    # PKI: a CA, the API server's serving certificate, client certificates, SA signing keys.
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
      -keyout "$dir/pki/ca.key" -out "$dir/pki/ca.crt" -subj "/CN=gpuheal-test-ca" 2>/dev/null
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$dir/pki/apiserver.key" -subj "/CN=kube-apiserver" -out "$dir/pki/apiserver.csr" 2>/dev/null
    openssl x509 -req -in "$dir/pki/apiserver.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
      -CAcreateserial -days 2 -out "$dir/pki/apiserver.crt" -extfile <(printf '%s\n' \
      "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" \
      "extendedKeyUsage=serverAuth" "keyUsage=critical,digitalSignature") 2>/dev/null
    client_cert admin admin system:masters
    client_cert controller-manager system:kube-controller-manager
    client_cert scheduler system:kube-scheduler
    openssl genrsa -out "$dir/pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2>/dev/null

    etcd_port=$(free_port)
    peer_port=$(free_port)
    api_port=$(free_port)
    start etcd "$bin/etcd" --name default --data-dir "$dir/etcd" \
      --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
      --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
      --initial-cluster "default=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level warn
    wait_for etcd 60 curl -sf "http://127.0.0.1:$etcd_port/health"
    echo "http://127.0.0.1:$etcd_port" > "$dir/etcd.url"

    admission=()
    # Without controller-manager no default ServiceAccount exists, so that admission plugin would
    # reject every pod.
    [[ $with_controllers == 0 ]] && admission=(--disable-admission-plugins=ServiceAccount)
    # A real kubelet authenticates as system:node:<name>: the Node authorizer grants it what its
    # pods need, NodeRestriction limits its writes to its own Node and pods.
    authorization=RBAC
    [[ $with_node == 1 ]] && { authorization=Node,RBAC; admission=(--enable-admission-plugins=NodeRestriction); }
    apiserver_cmd=("$bin/kube-apiserver" \
      --etcd-servers "http://127.0.0.1:$etcd_port" \
      --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
      --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
      --client-ca-file "$dir/pki/ca.crt" --authorization-mode "$authorization" \
      --service-account-issuer "https://127.0.0.1:$api_port" \
      --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
      --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true --profiling=false \
      --endpoint-reconciler-type none "${admission[@]}" "${apiserver_args[@]}")
    printf '%q ' "${apiserver_cmd[@]}" > "$dir/kube-apiserver.cmd"
    start kube-apiserver "${apiserver_cmd[@]}"
    kubeconfig "$dir/admin.kubeconfig" admin "$dir/pki/admin.crt" "$dir/pki/admin.key"
    curl_api=(curl -sf --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key")
    wait_for kube-apiserver 120 "${curl_api[@]}" "https://127.0.0.1:$api_port/readyz"

    if [[ $with_controllers == 1 ]]; then
      kubeconfig "$dir/controller-manager.kubeconfig" system:kube-controller-manager \
        "$dir/pki/controller-manager.crt" "$dir/pki/controller-manager.key"
      kubeconfig "$dir/scheduler.kubeconfig" system:kube-scheduler "$dir/pki/scheduler.crt" "$dir/pki/scheduler.key"
      kcm_limits=()
      scheduler_limits=""
      if [[ -n $client_qps ]]; then
        kcm_limits=(--kube-api-qps "$client_qps" --kube-api-burst $((2 * client_qps)))
        scheduler_limits=$(printf '  qps: %s\n  burst: %s' "$client_qps" $((2 * client_qps)))
      fi
      verbosity=()
      [[ -n $log_v ]] && verbosity=(-v "$log_v")
      start kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig "$dir/controller-manager.kubeconfig" "${kcm_limits[@]}" "${verbosity[@]}" \
        --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
        --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
        --leader-elect=true --bind-address 127.0.0.1 --secure-port "$(free_port)" \
        --authorization-always-allow-paths /healthz,/readyz,/livez,/metrics \
        --root-ca-file "$dir/pki/ca.crt" --service-account-private-key-file "$dir/pki/sa.key" \
        --use-service-account-credentials=true \
        --cluster-signing-cert-file "$dir/pki/ca.crt" --cluster-signing-key-file "$dir/pki/ca.key"
      # A configuration file: the scheduler's client limits have no flag that is not deprecated.
      cat > "$dir/scheduler.yaml" <<CFG
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $dir/scheduler.kubeconfig
$scheduler_limits
leaderElection:
  leaderElect: true
CFG
      start kube-scheduler "$bin/kube-scheduler" --config "$dir/scheduler.yaml" "${verbosity[@]}" \
        --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
        --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port "$(free_port)" \
        --authorization-always-allow-paths /healthz,/readyz,/livez,/metrics
      leases="https://127.0.0.1:$api_port/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
      wait_for kube-controller-manager 120 "${curl_api[@]}" "$leases/kube-controller-manager"
      wait_for kube-scheduler 120 "${curl_api[@]}" "$leases/kube-scheduler"
    fi
    if [[ $with_node == 1 ]]; then
      bash "$root/scripts/real-node.sh" up "$dir" "$api_port"
    fi
    if [[ $with_karpenter == 1 ]]; then
      karpenter_dir=$(bash "$root/scripts/build-peer.sh" karpenter | sed -n 's/^KARPENTER_DIR=//p')
      api="https://127.0.0.1:$api_port"
      # post PATH CONTENT-TYPE: creates an object from stdin (the API server takes YAML too).
      post() { "${curl_api[@]}" -o /dev/null -X POST -H "Content-Type: $2" --data-binary @- "$api$1"; }
      for crd in "$karpenter_dir"/crds/*.yaml; do
        post /apis/apiextensions.k8s.io/v1/customresourcedefinitions application/yaml < "$crd"
      done
      wait_for karpenter-crds 60 "${curl_api[@]}" "$api/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses"
      wait_for karpenter-crds 60 "${curl_api[@]}" "$api/apis/karpenter.sh/v1/nodepools"
      # The kwok provider has no NodeClass controller: its NodeClass is Ready as written.
      post /apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses application/yaml <<'YAML'
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: gpu}
YAML
      now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
      "${curl_api[@]}" -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" \
        --data "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Ready\",\"message\":\"\",\"lastTransitionTime\":\"$now\",\"observedGeneration\":1}]}}" \
        "$api/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses/gpu/status"
      # The GPU pool: on-demand 8-GPU machines; voluntary disruption off, so Karpenter replaces
      # what is deleted and consolidates nothing on its own.
      post /apis/karpenter.sh/v1/nodepools application/yaml <<'YAML'
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    metadata:
      labels: {gpuheal.io/pool: gpu, nvidia.com/gpu.present: "true"}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: gpu}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [gpu-8x-amd64-linux]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
    budgets: [{nodes: "0"}]
YAML
      kubeconfig "$dir/karpenter.kubeconfig" karpenter "$dir/pki/admin.crt" "$dir/pki/admin.key"
      karpenter_health=$(free_port)
      KUBECONFIG=$dir/karpenter.kubeconfig INSTANCE_TYPES_FILE_PATH=$root/tools/peers/karpenter/instance-types.json \
        METRICS_PORT=$(free_port) HEALTH_PROBE_PORT=$karpenter_health DISABLE_LEADER_ELECTION=true \
        BATCH_IDLE_DURATION=100ms BATCH_MAX_DURATION=1s LOG_LEVEL=debug \
        start karpenter "$karpenter_dir/bin/karpenter"
      wait_for karpenter 120 curl -sf "http://127.0.0.1:$karpenter_health/readyz"
      # Beside the kubeconfig, for a drill given only --kubeconfig: which Karpenter runs here.
      cp "$karpenter_dir/version" "$dir/karpenter.version"
      echo "KARPENTER_VERSION=$(awk '{print $2}' "$karpenter_dir/version")"
    fi
    if [[ $with_capi == 1 ]]; then
      capi_dir=$(bash "$root/scripts/build-peer.sh" capi | sed -n 's/^CAPI_DIR=//p')
      api="https://127.0.0.1:$api_port"
      # The managers' webhook servers (conversion between the CRDs' versions, defaulting and
      # validation), on loopback with a serving certificate of the test CA.
      openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$dir/pki/capi-webhook.key" -subj "/CN=capi-webhook" -out "$dir/pki/capi-webhook.csr" 2>/dev/null
      openssl x509 -req -in "$dir/pki/capi-webhook.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
        -CAcreateserial -days 2 -out "$dir/pki/capi-webhook.crt" -extfile <(printf '%s\n' \
        "subjectAltName=IP:127.0.0.1" "extendedKeyUsage=serverAuth" "keyUsage=critical,digitalSignature") 2>/dev/null
      mkdir -p "$dir/capi-certs" "$dir/capi-webhooks"
      cp "$dir/pki/capi-webhook.crt" "$dir/capi-certs/tls.crt"
      cp "$dir/pki/capi-webhook.key" "$dir/capi-certs/tls.key"
      ca_bundle=$(base64 -w0 < "$dir/pki/ca.crt")
      declare -A webhook_port=([core]=$(free_port) [capd]=$(free_port))
      crd_post() { "${curl_api[@]}" -o /dev/null -X POST -H "Content-Type: application/yaml" --data-binary @- "$api$1"; }
      for part in core capd; do
        url="https://127.0.0.1:${webhook_port[$part]}"
        for crd in "$capi_dir/crds/$part"/*.yaml; do
          # The labels the providers' release manifests give their CRDs: the provider, and the
          # Cluster API contract versions (an infrastructure CRD without them is refused). A CRD
          # that serves more than one version converts through its manager's webhook.
          labels=("cluster.x-k8s.io/provider: cluster-api")
          [[ $part == capd ]] && labels=("cluster.x-k8s.io/provider: infrastructure-docker" \
            "cluster.x-k8s.io/v1beta1: v1beta1" "cluster.x-k8s.io/v1beta2: v1beta2")
          convert=0
          (( $(grep -cE '^  - name: v|^    name: v' "$crd") > 1 )) && convert=1
          awk -v url="$url/convert" -v ca="$ca_bundle" -v convert=$convert -v labels="$(printf '%s\n' "${labels[@]}")" '
            { print }
            /^metadata:$/ && !m { print "  labels:"; n = split(labels, l, "\n"); for (i = 1; i <= n; i++) if (l[i] != "") print "    " l[i]; m = 1 }
            /^spec:$/ && convert && !s {
              print "  conversion:"; print "    strategy: Webhook"; print "    webhook:"
              print "      conversionReviewVersions: [\"v1\"]"; print "      clientConfig:"
              print "        url: " url; print "        caBundle: " ca; s = 1 }' "$crd" |
            crd_post /apis/apiextensions.k8s.io/v1/customresourcedefinitions
        done
        # The webhook configurations: one object per document, the in-cluster Service replaced by
        # the manager's loopback URL, named per manager as their release manifests name them.
        awk -v url="$url" -v ca="$ca_bundle" -v prefix="$part-" -v out="$dir/capi-webhooks/$part-" '
          /^---$/ { n++; next }
          /^  name: (mutating|validating)-webhook-configuration$/ { sub(/name: /, "name: " prefix) }
          /^    service:$/ { svc = 1; next }
          svc && /^      (name|namespace):/ { next }
          svc && /^      path:/ { print "    url: " url $2 > (out n ".yaml"); print "    caBundle: " ca > (out n ".yaml"); svc = 0; next }
          { print > (out n ".yaml") }' "$capi_dir/webhooks/$part.yaml"
      done
      wait_for capi-crds 60 "${curl_api[@]}" "$api/apis/cluster.x-k8s.io/v1beta2/machines"
      wait_for capi-crds 60 "${curl_api[@]}" "$api/apis/infrastructure.cluster.x-k8s.io/v1beta2/devmachines"
      for f in "$dir"/capi-webhooks/*.yaml; do
        case $(sed -n 's/^kind: //p' "$f") in
          MutatingWebhookConfiguration) crd_post /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations < "$f" ;;
          ValidatingWebhookConfiguration) crd_post /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations < "$f" ;;
        esac
      done
      kubeconfig "$dir/capi.kubeconfig" capi "$dir/pki/admin.crt" "$dir/pki/admin.key"
      for part in core capd; do
        health=$(free_port)
        KUBECONFIG=$dir/capi.kubeconfig start "capi-$part" "$capi_dir/bin/$([[ $part == core ]] && echo capi || echo capd)-manager" \
          --leader-elect=false --webhook-port "${webhook_port[$part]}" --webhook-cert-dir "$dir/capi-certs" \
          --health-addr "127.0.0.1:$health" --diagnostics-address "127.0.0.1:$(free_port)" --insecure-diagnostics
        wait_for "capi-$part" 120 curl -sf "http://127.0.0.1:$health/readyz"
      done
      cp "$capi_dir/version" "$dir/capi.version"
      echo "CAPI_VERSION=$(awk '$1 == "sigs.k8s.io/cluster-api" {print $2}' "$capi_dir/version")"
    fi
    trap - ERR
    log "up in $dir (etcd :$etcd_port, apiserver :$api_port$([[ $with_controllers == 1 ]] && echo ', controller-manager, scheduler'))"
    echo "KUBECONFIG=$dir/admin.kubeconfig"
    ;;
  down)
    if [[ -z $dir ]]; then
      [[ -f $last_file ]] || { echo "control-plane.sh down: no --dir and no control plane started without one" >&2; exit 2; }
      dir=$(cat "$last_file")
      rm -f "$last_file"
    fi
    [[ -d $dir ]] || { echo "control-plane.sh down: $dir does not exist" >&2; exit 2; }
    bash "$root/scripts/real-node.sh" down "$dir"
    stop_all "$dir"
    if [[ $keep_logs == 1 ]]; then
      find "$dir" -mindepth 1 -maxdepth 1 ! -name '*.log' -exec rm -rf {} +
    else
      rm -rf "$dir"
    fi
    ;;
  stop-apiserver)
    [[ -n $dir && -f $dir/pids ]] || { echo "control-plane.sh stop-apiserver: --dir DIR of a running control plane is required" >&2; exit 2; }
    pid=$(awk '$1 == "kube-apiserver" {print $2}' "$dir/pids" | tail -1)
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    ;;
  start-apiserver)
    [[ -n $dir && -f $dir/kube-apiserver.cmd ]] || { echo "control-plane.sh start-apiserver: --dir DIR of a control plane is required" >&2; exit 2; }
    eval "start kube-apiserver $(cat "$dir/kube-apiserver.cmd")"
    api_port=$(grep -o 'https://127.0.0.1:[0-9]*' "$dir/admin.kubeconfig" | head -1 | cut -d: -f3)
    wait_for kube-apiserver 120 curl -sf --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" \
      --key "$dir/pki/admin.key" "https://127.0.0.1:$api_port/readyz"
    ;;
  *)
    echo "usage: control-plane.sh up [--with-controllers] [--with-node] [--with-karpenter] [--with-capi] [--dir DIR] [--apiserver-arg ARG]... [--client-qps N] [--log-v N] | down [--dir DIR] [--keep-logs] | stop-apiserver --dir DIR | start-apiserver --dir DIR" >&2
    exit 2
    ;;
esac
