{{/* HorizontalPodAutoscalers (distributed mode only: the single binary does not autoscale). */}}

{{/* A service's HorizontalPodAutoscaler on CPU, when `<service>.autoscaling.enabled`. Call with (dict "ctx" $ "component" "messages"). */}}
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
{{- end }}
{{- end -}}
{{- end -}}
