{{/*
The media blob store: where the media service keeps uploaded files (media.blobDir), on an
emptyDir or a PersistentVolumeClaim (media.persistence).
*/}}

{{/* Non-empty when the media blobs are on a volume that only one pod may mount. */}}
{{- define "oxigram.mediaSingleWriter" -}}
{{- $p := .Values.media.persistence -}}
{{- if and $p.enabled (or (has "ReadWriteOnce" $p.accessModes) (has "ReadWriteOncePod" $p.accessModes)) -}}
true
{{- end -}}
{{- end -}}

{{/* Name of the media blob claim. */}}
{{- define "oxigram.mediaClaimName" -}}
{{- .Values.media.persistence.existingClaim | default (printf "%s-blobs" (include "oxigram.resourceName" (dict "ctx" . "component" "media"))) -}}
{{- end -}}

{{/* The media blob claim, when persistence is on and no existing claim is given. */}}
{{- define "oxigram.mediaPvc" -}}
{{- $p := .Values.media.persistence -}}
{{- if and $p.enabled (not $p.existingClaim) }}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ include "oxigram.mediaClaimName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" . "component" "media") | nindent 4 }}
  annotations:
    # Keep the blobs when the release is uninstalled.
    helm.sh/resource-policy: keep
    {{- with $p.annotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  accessModes:
    {{- toYaml $p.accessModes | nindent 4 }}
  {{- with $p.storageClass }}
  storageClassName: {{ . | quote }}
  {{- end }}
  resources:
    requests:
      storage: {{ $p.size }}
{{- end }}
{{- end -}}
