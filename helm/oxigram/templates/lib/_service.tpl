{{/* Services: the gRPC port and the metrics port of a component. */}}

{{/*
The Service(s) of a component. Call with (dict "ctx" $ "component" C "values" V "port" P).
The gRPC port is named `grpc`, the metrics port `http-metrics`. When `V.service.type` is not
ClusterIP (an exposed gateway), the metrics port goes on a separate ClusterIP Service
`<name>-metrics` instead, so it is never exposed outside the cluster.
*/}}
{{- define "oxigram.service" -}}
{{- $ctx := .ctx -}}
{{- $c := .values -}}
{{- $type := dig "service" "type" "ClusterIP" $c -}}
{{- $metrics := $ctx.Values.metrics.enabled -}}
{{- $name := include "oxigram.resourceName" (dict "ctx" $ctx "component" .component) -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
  {{- with (dig "service" "annotations" (dict) $c) }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $type }}
  ports:
    - name: grpc
      port: {{ .port | int }}
      targetPort: grpc
      protocol: TCP
    {{- if and $metrics (eq $type "ClusterIP") }}
    - name: http-metrics
      port: {{ $ctx.Values.metrics.port | int }}
      targetPort: http-metrics
      protocol: TCP
    {{- end }}
  selector:
    {{- include "oxigram.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
{{- if and $metrics (ne $type "ClusterIP") }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ printf "%s-metrics" $name | trunc 63 | trimSuffix "-" }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
spec:
  type: ClusterIP
  ports:
    - name: http-metrics
      port: {{ $ctx.Values.metrics.port | int }}
      targetPort: http-metrics
      protocol: TCP
  selector:
    {{- include "oxigram.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
{{- end }}
{{- end -}}

{{/* A service's Service(s), rendered only in distributed mode. Call with (dict "ctx" $ "component" "messages"). */}}
{{- define "oxigram.componentService" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- $c := index .ctx.Values .component -}}
{{- include "oxigram.service" (dict "ctx" .ctx "component" .component "values" $c "port" $c.port) -}}
{{- end -}}
{{- end -}}
