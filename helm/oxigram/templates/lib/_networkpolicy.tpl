{{/*
NetworkPolicies (networkPolicy.enabled): each service's gRPC port is reachable only from the
services that call it; the gateway's also from its clients (networkPolicy.gatewayFrom, or
anyone); the metrics port from networkPolicy.metricsFrom (or anyone); Postgres and Redis,
when their pods are named, only from the pods that use them.
*/}}

{{/* Who calls each service, in distributed mode (the outbound modules of the services). */}}
{{- define "oxigram.callers" -}}
gateway: [dispatch]
messages: [gateway]
updates: [gateway, messages, dialogs]
dialogs: [gateway, updates]
dispatch: [updates]
media: [gateway]
{{- end -}}

{{/* A peer selecting one component's pods of this release. Call with (dict "ctx" $ "component" C). */}}
{{- define "oxigram.peer" -}}
- podSelector:
    matchLabels:
      {{- include "oxigram.selectorLabels" . | nindent 6 }}
{{- end -}}

{{/*
The NetworkPolicy of one component's pods. Call with (dict "ctx" $ "component" C "port" P
"callers" LIST): LIST the components allowed on the gRPC port; for the gateway (and the
single binary) its clients too.
*/}}
{{- define "oxigram.networkPolicy" -}}
{{- $ctx := .ctx -}}
{{- $np := $ctx.Values.networkPolicy -}}
{{- $client := or (eq .component "gateway") (eq .component "single-binary") -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "oxigram.resourceName" (dict "ctx" $ctx "component" .component) }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "oxigram.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 6 }}
  policyTypes:
    - Ingress
  ingress:
    - ports:
        - port: grpc
          protocol: TCP
      {{- if and $client (not $np.gatewayFrom) }}
      {{- /* anyone: the client API */}}
      {{- else }}
      from:
        {{- range .callers }}
        {{- include "oxigram.peer" (dict "ctx" $ctx "component" .) | nindent 8 }}
        {{- end }}
        {{- if $client }}
        {{- toYaml $np.gatewayFrom | nindent 8 }}
        {{- /* the chart's own `helm test` pod */}}
        {{- include "oxigram.peer" (dict "ctx" $ctx "component" "test") | nindent 8 }}
        {{- end }}
      {{- end }}
    {{- if $ctx.Values.metrics.enabled }}
    - ports:
        - port: http-metrics
          protocol: TCP
      {{- with $np.metricsFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
{{- end -}}

{{/* A service's NetworkPolicy, in distributed mode. Call with (dict "ctx" $ "component" C). */}}
{{- define "oxigram.componentNetworkPolicy" -}}
{{- if and .ctx.Values.networkPolicy.enabled (include "oxigram.distributed" .ctx) -}}
{{- $callers := index (include "oxigram.callers" .ctx | fromYaml) .component -}}
{{- include "oxigram.networkPolicy" (dict "ctx" .ctx "component" .component "callers" $callers) -}}
{{- end -}}
{{- end -}}

{{/*
The NetworkPolicy of a datastore outside the chart (Postgres or Redis), when its pods are
named: only `users` (components of this release) may reach `port`. Call with
(dict "ctx" $ "name" "postgres" "store" .Values.networkPolicy.postgres "users" LIST).
*/}}
{{- define "oxigram.storeNetworkPolicy" -}}
{{- $ctx := .ctx -}}
{{- if and $ctx.Values.networkPolicy.enabled .store.podSelector }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ printf "%s-%s" (include "oxigram.fullname" $ctx) .name | trunc 63 | trimSuffix "-" }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" $ctx "component" "") | nindent 4 }}
spec:
  podSelector:
    {{- toYaml .store.podSelector | nindent 4 }}
  policyTypes:
    - Ingress
  ingress:
    - ports:
        - port: {{ .store.port | int }}
          protocol: TCP
      from:
        {{- range .users }}
        {{- include "oxigram.peer" (dict "ctx" $ctx "component" .) | nindent 8 }}
        {{- end }}
        {{- with .store.extraFrom }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
{{- end }}
{{- end -}}
