{{/* HorizontalPodAutoscalers (distributed mode only: the single binary does not autoscale). */}}

{{/* A service's HorizontalPodAutoscaler on CPU (plus memory and `autoscaling.metrics`, e.g. Pods metrics from a custom-metrics adapter), with `autoscaling.behavior`, when `<service>.autoscaling.enabled`. Call with (dict "ctx" $ "component" "messages"). */}}
{{- define "oxigram.componentHpa" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- $c := index .ctx.Values .component -}}
{{- if $c.autoscaling.enabled }}
apiVersion: {{ include "oxigram.hpaApiVersion" .ctx }}
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "oxigram.resourceName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "oxigram.resourceName" . }}
  minReplicas: {{ $c.autoscaling.minReplicas | int }}
  maxReplicas: {{ $c.autoscaling.maxReplicas | int }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $c.autoscaling.targetCPUUtilizationPercentage | int }}
    {{- with $c.autoscaling.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ . | int }}
    {{- end }}
    {{- with $c.autoscaling.metrics }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $c.autoscaling.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}
{{- end -}}
