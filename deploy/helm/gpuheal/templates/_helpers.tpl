{{/* The namespace of every object of the chart. */}}
{{- define "gpuheal.namespace" -}}
{{- .Values.namespace.name -}}
{{- end -}}

{{/* The image reference, tag defaulting to the chart's appVersion. */}}
{{- define "gpuheal.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Labels on every object: name is the component (agent, controller, cleanup). */}}
{{- define "gpuheal.labels" -}}
app.kubernetes.io/part-of: gpuheal
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* KUBERNETES_SERVICE_HOST/PORT when kubernetesAPI overrides the Service. */}}
{{- define "gpuheal.apiEnv" -}}
{{- if .Values.kubernetesAPI.host }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.kubernetesAPI.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.kubernetesAPI.port | default "443" | quote }}
{{- end }}
{{- end -}}

{{/* "true" when the policy uses provider redfish: as provider.name or as a ladder rung
    (redfish, or {redfish: N}). */}}
{{- define "gpuheal.usesRedfish" -}}
{{- $p := .Values.controller.policy -}}
{{- $uses := eq (toString (get ($p.provider | default dict) "name")) "redfish" -}}
{{- range $sev, $rungs := ($p.ladder | default dict) -}}
{{- range $rungs -}}
{{- if or (eq (toString .) "redfish") (and (kindIs "map" .) (hasKey . "redfish")) -}}
{{- $uses = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $uses -}}true{{- end -}}
{{- end -}}

{{/* The controller's policy: critical action gpu-reset only when the agent resets GPUs; the
    chart's namespace among those never drained. */}}
{{- define "gpuheal.policy" -}}
{{- $p := deepCopy .Values.controller.policy -}}
{{- $c := get $p "critical" | default dict -}}
{{- if not (get $c "action") -}}
{{- $_ := set $c "action" (ternary "gpu-reset" "node" (and .Values.agent.enabled .Values.agent.gpuReset)) -}}
{{- end -}}
{{- $_ := set $p "critical" $c -}}
{{- /* Never drain gpuheal itself: its controller may run on a node it quarantines. */ -}}
{{- $skip := get $p "skip" | default dict -}}
{{- $nss := get $skip "namespaces" | default list -}}
{{- if not (has (include "gpuheal.namespace" .) $nss) -}}
{{- $nss = append $nss (include "gpuheal.namespace" .) -}}
{{- end -}}
{{- $_ := set $skip "namespaces" $nss -}}
{{- $_ := set $p "skip" $skip -}}
{{- /* provider redfish: the Secret and ConfigMap its Role may read, in the chart's namespace. */ -}}
{{- $pr := get $p "provider" | default dict -}}
{{- if include "gpuheal.usesRedfish" . -}}
{{- $rf := get $pr "redfish" | default dict -}}
{{- $_ := set $rf "credentials_secret" (printf "%s/gpuheal-bmc" (include "gpuheal.namespace" .)) -}}
{{- $_ := set $rf "endpoints_configmap" (printf "%s/gpuheal-bmc-endpoints" (include "gpuheal.namespace" .)) -}}
{{- $_ := set $pr "redfish" $rf -}}
{{- end -}}
{{- toYaml $p -}}
{{- end -}}

{{/* The agent's config: values' config plus what other values decide. */}}
{{- define "gpuheal.agentConfig" -}}
{{- $cfg := deepCopy .Values.agent.config -}}
{{- $_ := set $cfg "accept_injected" .Values.agent.acceptInjected -}}
{{- $_ := set $cfg "kmsg_bpf" (toString .Values.agent.kmsgBpf) -}}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%d" (int .Values.agent.metricsPort)) -}}
{{- $nv := get $cfg "nvidia" | default dict -}}
{{- $reset := get $nv "reset" | default dict -}}
{{- $_ := set $reset "on_critical" .Values.agent.gpuReset -}}
{{- $_ := set $nv "reset" $reset -}}
{{- $_ := set $cfg "nvidia" $nv -}}
{{- toYaml $cfg -}}
{{- end -}}
