{{/*
Names, labels and the small predicates every template shares. The helpers that build one kind
of object live in lib/ (one file per kind: _deployment.tpl, _service.tpl, _hpa.tpl, _pdb.tpl,
_servicemonitor.tpl, _media.tpl, and _config.tpl for the environment that configures a
process). Their file names start with `_`, so Helm reads them as partials and never renders
them as manifests. The component folders (gateway/, messages/, …, single-binary/) hold one
manifest per object, each a call of one of those helpers.
*/}}

{{/* Chart name. */}}
{{- define "oxigram.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: `<release>-oxigram`, or the release name when it already contains the chart name. */}}
{{- define "oxigram.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* `name-version` for the helm.sh/chart label. */}}
{{- define "oxigram.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The six services, in one line; use with `splitList " "`. Their values live under the key of
the same name (`.Values.messages`, …).
*/}}
{{- define "oxigram.componentNames" -}}
gateway messages updates dialogs dispatch media
{{- end -}}

{{/* Name of a component's resources. Call with (dict "ctx" $ "component" "messages"). */}}
{{- define "oxigram.resourceName" -}}
{{- printf "%s-%s" (include "oxigram.fullname" .ctx) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels. Call with (dict "ctx" $ "component" "messages"); component may be empty. */}}
{{- define "oxigram.selectorLabels" -}}
app.kubernetes.io/name: {{ include "oxigram.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* Common labels. Call with (dict "ctx" $ "component" "messages"); component may be empty. */}}
{{- define "oxigram.labels" -}}
helm.sh/chart: {{ include "oxigram.chart" .ctx }}
{{ include "oxigram.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: oxigram
{{- end -}}

{{/* The image reference. */}}
{{- define "oxigram.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString (default .Chart.AppVersion .Values.image.tag)) -}}
{{- end -}}

{{/* The ServiceAccount of every pod: the chart's own, or the one named in serviceAccount.name. */}}
{{- define "oxigram.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "oxigram.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* True (non-empty) when the chart must create its Secret (an inline DSN or Redis URL). */}}
{{- define "oxigram.createSecret" -}}
{{- if or (include "oxigram.inlineStoreUrls" .) (and .Values.admin.token (not .Values.admin.existingSecret)) -}}
true
{{- end -}}
{{- end -}}

{{/* Whether the DSN or the Redis URL is given inline, and so read from the chart's Secret. */}}
{{- define "oxigram.inlineStoreUrls" -}}
{{- if or (and .Values.database.url (not .Values.database.existingSecret)) (and .Values.redis.url (not .Values.redis.existingSecret)) -}}
true
{{- end -}}
{{- end -}}

{{/* The Secret holding the admin token: the existing one, else the chart's. */}}
{{- define "oxigram.adminSecretName" -}}
{{- .Values.admin.existingSecret | default (include "oxigram.fullname" .) -}}
{{- end -}}

{{/* The Secret holding the default DSN: the existing one, else the chart's. */}}
{{- define "oxigram.databaseSecretName" -}}
{{- .Values.database.existingSecret | default (include "oxigram.fullname" .) -}}
{{- end -}}

{{/* The Secret holding the Redis URL: the existing one, else the chart's. */}}
{{- define "oxigram.redisSecretName" -}}
{{- .Values.redis.existingSecret | default (include "oxigram.fullname" .) -}}
{{- end -}}

{{/* True (non-empty) in distributed mode. */}}
{{- define "oxigram.distributed" -}}
{{- if eq .Values.deploymentMode "distributed" -}}
true
{{- end -}}
{{- end -}}

{{/* True (non-empty) in singleBinary mode. */}}
{{- define "oxigram.singleBinary" -}}
{{- if eq .Values.deploymentMode "singleBinary" -}}
true
{{- end -}}
{{- end -}}

{{/*
What the cluster offers, from Helm's `.Capabilities` (discovery of the target cluster; `helm
template` uses Helm's defaults or --kube-version/--api-versions). The chart supports
Kubernetes 1.20 and later.
*/}}

{{/* policy/v1 (1.21+), else policy/v1beta1, whose PodDisruptionBudget has the same fields here. */}}
{{- define "oxigram.pdbApiVersion" -}}
{{- if .Capabilities.APIVersions.Has "policy/v1/PodDisruptionBudget" -}}
policy/v1
{{- else -}}
policy/v1beta1
{{- end -}}
{{- end -}}

{{/* autoscaling/v2 (1.23+), else autoscaling/v2beta2, whose spec is the same. */}}
{{- define "oxigram.hpaApiVersion" -}}
{{- if .Capabilities.APIVersions.Has "autoscaling/v2/HorizontalPodAutoscaler" -}}
autoscaling/v2
{{- else -}}
autoscaling/v2beta2
{{- end -}}
{{- end -}}

{{/* True (non-empty) when the kubelet can probe gRPC itself (Kubernetes 1.24+). */}}
{{- define "oxigram.hasGrpcProbes" -}}
{{- if semverCompare ">=1.24.0-0" .Capabilities.KubeVersion.Version -}}
true
{{- end -}}
{{- end -}}

{{/*
Sizing: the resources of a container whose `resources` value is empty, from
`resourcesPreset` (none, small, medium, large). Requests are what the scheduler reserves;
the memory limit guards the node; no CPU limit, so a busy pod is not throttled below what
the node has free. Call with (dict "ctx" $ "component" C); renders YAML.
*/}}
{{- define "oxigram.resourcesPreset" -}}
{{- $presets := dict
  "small" (dict "requests" (dict "cpu" "100m" "memory" "128Mi") "limits" (dict "memory" "512Mi"))
  "medium" (dict "requests" (dict "cpu" "500m" "memory" "256Mi") "limits" (dict "memory" "1Gi"))
  "large" (dict "requests" (dict "cpu" "2" "memory" "1Gi") "limits" (dict "memory" "4Gi")) -}}
{{- with get $presets .ctx.Values.resourcesPreset -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

{{/*
Default scheduling of a distributed service's pods when its `affinity` is empty: prefer
nodes without another pod of the same service, so one node's loss takes one replica.
Renders YAML (empty when scheduling.podAntiAffinity is "none" or in singleBinary mode).
*/}}
{{- define "oxigram.defaultAffinity" -}}
{{- $mode := .ctx.Values.scheduling.podAntiAffinity -}}
{{- if and (include "oxigram.distributed" .ctx) (ne .component "single-binary") (ne $mode "none") -}}
podAntiAffinity:
  {{- if eq $mode "hard" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "oxigram.selectorLabels" . | nindent 10 }}
  {{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "oxigram.selectorLabels" . | nindent 12 }}
  {{- end }}
{{- end -}}
{{- end -}}

{{/*
Default topology spread of a distributed service's pods when its
`topologySpreadConstraints` is empty: even over zones and over nodes, best effort
(ScheduleAnyway), so a one-zone cluster still schedules. Renders a YAML list.
*/}}
{{- define "oxigram.defaultTopologySpread" -}}
{{- if and (include "oxigram.distributed" .ctx) (ne .component "single-binary") .ctx.Values.scheduling.topologySpread -}}
{{- range $key := list "topology.kubernetes.io/zone" "kubernetes.io/hostname" }}
- maxSkew: 1
  topologyKey: {{ $key }}
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "oxigram.selectorLabels" $ | nindent 6 }}
{{- end }}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/* The ConfigMap holding the config file (config.inline or config.existingConfigMap), if any. */}}
{{- define "oxigram.configMapName" -}}
{{- if .Values.config.existingConfigMap -}}
{{- .Values.config.existingConfigMap -}}
{{- else if .Values.config.inline -}}
{{- printf "%s-config" (include "oxigram.fullname" .) -}}
{{- end -}}
{{- end -}}
