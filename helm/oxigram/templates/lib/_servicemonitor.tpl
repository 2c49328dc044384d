{{/* prometheus-operator ServiceMonitors. */}}

{{/* A ServiceMonitor, when serviceMonitor.enabled. Call with (dict "ctx" $ "component" C). */}}
{{- define "oxigram.serviceMonitor" -}}
{{- $ctx := .ctx -}}
{{- $sm := $ctx.Values.serviceMonitor -}}
{{- if and $sm.enabled $ctx.Values.metrics.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "oxigram.resourceName" (dict "ctx" $ctx "component" .component) }}
  namespace: {{ $sm.namespace | default $ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $sm.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  namespaceSelector:
    matchNames:
      - {{ $ctx.Release.Namespace }}
  selector:
    matchLabels:
      {{- include "oxigram.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 6 }}
  endpoints:
    - port: http-metrics
      path: /metrics
      scheme: http
      {{- with $sm.interval }}
      interval: {{ . }}
      {{- end }}
      {{- with $sm.scrapeTimeout }}
      scrapeTimeout: {{ . }}
      {{- end }}
      {{- with $sm.relabelings }}
      relabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $sm.metricRelabelings }}
      metricRelabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
{{- end -}}

{{/* A service's ServiceMonitor, rendered only in distributed mode. Call with (dict "ctx" $ "component" "messages"). */}}
{{- define "oxigram.componentServiceMonitor" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- include "oxigram.serviceMonitor" . -}}
{{- end -}}
{{- end -}}
