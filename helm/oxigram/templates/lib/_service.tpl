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
      appProtocol: grpc
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

{{/* Name of a component's headless Service. Call with (dict "ctx" $ "component" "messages"). */}}
{{- define "oxigram.headlessName" -}}
{{- printf "%s-headless" (include "oxigram.resourceName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
A component's headless Service: no virtual IP, its DNS name resolves to the addresses of
its ready pods. The other services dial it and balance their calls over those addresses
(oxigram_kit::balance), re-resolving as pods come and go; through the ClusterIP Service
each caller would keep one HTTP/2 connection to one pod. Call with
(dict "ctx" $ "component" C "port" P).
*/}}
{{- define "oxigram.headlessService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "oxigram.headlessName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
spec:
  clusterIP: None
  publishNotReadyAddresses: false
  ports:
    - name: grpc
      port: {{ .port | int }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
  selector:
    {{- include "oxigram.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
{{- end -}}

{{/*
A service's Services, rendered only in distributed mode: the ClusterIP one (clients of the
gateway, tools, metrics) and the headless one the other services call.
Call with (dict "ctx" $ "component" "messages").
*/}}
{{- define "oxigram.componentService" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- $c := index .ctx.Values .component -}}
{{- include "oxigram.service" (dict "ctx" .ctx "component" .component "values" $c "port" $c.port) }}
---
{{ include "oxigram.headlessService" (dict "ctx" .ctx "component" .component "port" $c.port) -}}
{{- end -}}
{{- end -}}
