#!/usr/bin/env bash
# This machine as a real Kubernetes node of a test control plane: containerd (Debian's) with runc
# and the CNI bridge plugin, and a kubelet built from the control plane's own Kubernetes module
# (scripts/build-node-tools.sh). Called by `control-plane.sh up --with-node` / `down`; not meant
# to be run by hand.
#
#   real-node.sh up DIR API_PORT   starts containerd and the kubelet, imports the images of
#                                  $GPUHEAL_IMAGE_DIR (default build/image: gpuheal.tar, pause.tar),
#                                  waits for the Node to be Ready, prints NODE=, NODE_KUBECONFIG=
#                                  (the kubelet's credentials), HELM=, PAUSE_IMAGE=
#   real-node.sh down DIR          stops pods, kubelet and containerd; removes mounts, network
#                                  namespaces, the CNI bridge and state, and the pods' cgroups
#
# The node is host-wide (cgroups, /dev/kmsg, a bridge): one at a time per machine, held by a lock
# in /run/gpuheal-real-node. cgroups: this kernel may offer only the v1 hierarchies; the kubelet
# of Kubernetes >= 1.35 refuses v1 unless failCgroupV1 is false, which the config below sets, with
# the cgroupfs driver (there is no systemd to delegate to). docs/testing.md says more.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
dir=${2:-}
[[ -n $dir ]] || { echo "usage: real-node.sh up DIR API_PORT | down DIR" >&2; exit 2; }
lock=/run/gpuheal-real-node
node_dir=$dir/node
sock=$node_dir/containerd/containerd.sock
bridge=gpuheal0
cni_net=gpuheal-test
log() { echo "real-node: $*" >&2; }

ctr_() { ctr --address "$sock" -n k8s.io "$@"; }

# shellcheck source=free-port.sh
source "$root/scripts/free-port.sh"
# shellcheck source=pki.sh
source "$root/scripts/pki.sh"

# Kills every process in the kubelet's pod cgroups and removes them, deepest first.
remove_pod_cgroups() {
  local ctl
  for ctl in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $ctl ]] || continue
    find "$ctl" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  sleep 0.2
  for ctl in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $ctl ]] || continue
    find "$ctl" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

down() {
  [[ -d $node_dir ]] || return 0
  # The kubelet first, so that it restarts nothing; then every pod's containers and sandboxes.
  if [[ -f $node_dir/pids ]]; then
    local pid
    pid=$(awk '$1 == "kubelet" {print $2}' "$node_dir/pids")
    [[ -n $pid ]] && { kill -TERM "$pid" 2>/dev/null || true; for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done; kill -KILL "$pid" 2>/dev/null || true; }
  fi
  if [[ -S $sock ]]; then
    local t
    for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    sleep 0.3
    for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks rm -f "$t" >/dev/null 2>&1 || true; done
  fi
  remove_pod_cgroups
  if [[ -f $node_dir/pids ]]; then
    local pid
    pid=$(awk '$1 == "containerd" {print $2}' "$node_dir/pids")
    [[ -n $pid ]] && { kill -TERM "$pid" 2>/dev/null || true; for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done; kill -KILL "$pid" 2>/dev/null || true; }
    rm -f "$node_dir/pids"
  fi
  # Whatever else runs from this node's directory (a containerd or kubelet not started by `up`).
  pkill -KILL -f "kubelet --config $node_dir/" 2>/dev/null || true
  pkill -KILL -f "containerd --config $node_dir/" 2>/dev/null || true
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null || true
  # Mounts under the node's directory (overlay roots, shm, the kubelet's volumes), deepest first.
  awk -v d="$node_dir" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  # Network namespaces the CRI made for this node's pods (those not there before `up`).
  if [[ -f $node_dir/netns.before ]]; then
    for ns in $(ls /var/run/netns 2>/dev/null); do
      [[ $ns == cni-* ]] && ! grep -qx "$ns" "$node_dir/netns.before" && ip netns delete "$ns" 2>/dev/null || true
    done
  fi
  ip link delete "$bridge" 2>/dev/null || true
  rm -rf /var/lib/cni/results/"$cni_net"-* 2>/dev/null || true
  rm -rf "$node_dir"
  if [[ -f $lock && $(cat "$lock") == "$dir" ]]; then rm -f "$lock"; fi
}

case $cmd in
  down)
    down
    ;;
  up)
    api_port=${3:?API_PORT}
    if [[ -f $lock ]] && [[ -d $(cat "$lock") ]]; then
      log "a real node already runs for $(cat "$lock"); stop it with control-plane.sh down --dir $(cat "$lock")"
      exit 1
    fi
    for tool in containerd ctr runc ip; do
      command -v "$tool" >/dev/null || { log "$tool is not installed (scripts/setup.sh node installs it)"; exit 2; }
    done
    [[ -x /usr/lib/cni/bridge ]] || { log "/usr/lib/cni/bridge missing (Debian package containernetworking-plugins)"; exit 2; }
    # The images scripts/build-image.sh built: the sandbox image is needed by every pod, gpuheal's
    # by the Helm chart. Nothing is pulled from a registry.
    image_dir=${GPUHEAL_IMAGE_DIR:-$root/build/image}
    [[ -f $image_dir/pause.tar ]] || { log "no $image_dir/pause.tar, the pods' sandbox image: run 'make image' (scripts/build-image.sh) first"; exit 2; }
    eval "$(bash "$root/scripts/build-node-tools.sh")"
    echo "$dir" > "$lock"
    trap 'down' ERR
    mkdir -p "$node_dir"/{containerd/root,containerd/state,containerd/runc,cni/net.d,cni/ipam,kubelet,pod-logs,pki}
    ls /var/run/netns 2>/dev/null > "$node_dir/netns.before" || : > "$node_dir/netns.before"
    node=gpuheal-real-node
    # The kubelet refuses a loopback node IP: the address of the interface of the default route.
    node_ip=$(ip -4 route get 192.0.2.255 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}' | head -1)
    [[ -n $node_ip ]] || { log "no IPv4 default route: the kubelet needs a node IP that is not loopback"; exit 1; }
    sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 2>/dev/null || sysctl -qw net.ipv4.ip_forward=1 || true

    # containerd: its own root, state and socket; the CRI plugin with runc (cgroupfs) and the
    # test bed's pause image as the sandbox image.
    cat > "$node_dir/containerd.toml" <<CFG
version = 2
root = "$node_dir/containerd/root"
state = "$node_dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/gpuheal-pause:dev"
  disable_apparmor = true
  # This machine's root may lack CAP_SYS_RESOURCE (a VM's bounding set): a negative
  # oom_score_adj (the kubelet asks -998 for every sandbox) then fails runc's init. Clamp it to
  # containerd's own, as containerd does for rootless use.
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$node_dir/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node_dir/cni/net.d"
CFG
    cat > "$node_dir/cni/net.d/10-$cni_net.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "$cni_net", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$node_dir/cni/ipam"}},
  {"type": "loopback"}]}
CNI
    containerd --config "$node_dir/containerd.toml" > "$dir/containerd.log" 2>&1 &
    echo "containerd $!" >> "$node_dir/pids"
    for _ in $(seq 1 100); do ctr_ version >/dev/null 2>&1 && break; sleep 0.1; done
    ctr_ version >/dev/null 2>&1 || { log "containerd did not start; its log:"; tail -20 "$dir/containerd.log" >&2; exit 1; }
    for image in "$image_dir"/gpuheal.tar "$image_dir"/pause.tar; do
      [[ -f $image ]] && ctr_ images import "$image" >/dev/null
    done

    # The kubelet: credentials of system:node:<name> (so the Node authorizer and NodeRestriction
    # apply), its own root directory, loopback only.
    client_cert kubelet "system:node:$node" system:nodes
    kubeconfig "$node_dir/kubelet.kubeconfig" "system:node:$node" "$dir/pki/kubelet.crt" "$dir/pki/kubelet.key"
    cat > "$node_dir/kubelet.yaml" <<CFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $(free_port)
healthzBindAddress: 127.0.0.1
healthzPort: $(free_port)
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podLogsDir: $node_dir/pod-logs
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
CFG
    "$KUBELET" --config "$node_dir/kubelet.yaml" --kubeconfig "$node_dir/kubelet.kubeconfig" \
      --root-dir "$node_dir/kubelet" --cert-dir "$node_dir/pki" --hostname-override "$node" \
      --node-ip "$node_ip" --node-labels "nvidia.com/gpu.present=true,test.gpuheal.dev/real-node=true" \
      > "$dir/kubelet.log" 2>&1 &
    echo "kubelet $!" >> "$node_dir/pids"
    # Not curl's own User-Agent: the API server pretty-prints JSON for it, one field per line.
    curl_api=(curl -sf -A gpuheal-real-node --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key")
    deadline=$(( $(date +%s) + 120 ))
    until "${curl_api[@]}" "https://127.0.0.1:$api_port/api/v1/nodes/$node" 2>/dev/null | grep -q '"type":"Ready","status":"True"'; do
      if (( $(date +%s) > deadline )) || ! kill -0 "$(awk '$1 == "kubelet" {print $2}' "$node_dir/pids")" 2>/dev/null; then
        log "node $node did not become Ready in 120 s; the kubelet's log:"
        tail -n 30 "$dir/kubelet.log" >&2
        false
      fi
      sleep 0.5
    done
    trap - ERR
    log "node $node Ready (kubelet $("$KUBELET" --version | awk '{print $2}'), containerd $(containerd --version | awk '{print $3}'))"
    echo "NODE=$node"
    echo "NODE_KUBECONFIG=$node_dir/kubelet.kubeconfig"
    echo "HELM=$HELM"
    echo "PAUSE_IMAGE=docker.io/library/gpuheal-pause:dev"
    ;;
  *)
    echo "usage: real-node.sh up DIR API_PORT | down DIR" >&2
    exit 2
    ;;
esac
