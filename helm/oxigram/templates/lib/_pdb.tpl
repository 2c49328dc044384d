{{/* PodDisruptionBudgets. */}}

{{/* A PodDisruptionBudget, when enabled. Call with (dict "ctx" $ "component" C "values" V). */}}
{{- define "oxigram.pdb" -}}
{{- $c := .values -}}
{{- if dig "podDisruptionBudget" "enabled" false $c }}
apiVersion: {{ include "oxigram.pdbApiVersion" .ctx }}
kind: PodDisruptionBudget
metadata:
  name: {{ include "oxigram.resourceName" (dict "ctx" .ctx "component" .component) }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
spec:
  maxUnavailable: {{ $c.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "oxigram.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 6 }}
{{- end }}
{{- end -}}

{{/* A service's PodDisruptionBudget, rendered only in distributed mode. Call with (dict "ctx" $ "component" "messages"). */}}
{{- define "oxigram.componentPdb" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- include "oxigram.pdb" (dict "ctx" .ctx "component" .component "values" (index .ctx.Values .component)) -}}
{{- end -}}
{{- end -}}
