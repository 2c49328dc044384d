{{/*
The media blob store: where the media service keeps uploaded files, in an S3-compatible
bucket (media.s3) or under media.blobDir on an emptyDir or a PersistentVolumeClaim
(media.persistence); and the key file references are signed with (media.fileReference).
*/}}

{{/* Non-empty when the media blobs are on a volume (no bucket is set). */}}
{{- define "oxigram.mediaOnVolume" -}}
{{- if not .Values.media.s3.bucket -}}
true
{{- end -}}
{{- end -}}

{{/* Non-empty when the media blobs are on a volume that only one pod may mount. */}}
{{- define "oxigram.mediaSingleWriter" -}}
{{- $p := .Values.media.persistence -}}
{{- if and (include "oxigram.mediaOnVolume" .) $p.enabled (or (has "ReadWriteOnce" $p.accessModes) (has "ReadWriteOncePod" $p.accessModes)) -}}
true
{{- end -}}
{{- end -}}

{{/* Name of the Secret holding the file reference signing key. */}}
{{- define "oxigram.fileReferenceSecretName" -}}
{{- .Values.media.fileReference.existingSecret | default (printf "%s-file-reference" (include "oxigram.fullname" .)) -}}
{{- end -}}

{{/*
The chart-created Secret with the file reference signing key, when no existing Secret is
named. The key is random, made once: an upgrade reads it back from the cluster, since a new
key would make every file reference clients hold stale.
*/}}
{{- define "oxigram.fileReferenceSecret" -}}
{{- $f := .Values.media.fileReference -}}
{{- if not $f.existingSecret }}
{{- $name := include "oxigram.fileReferenceSecretName" . -}}
{{- $key := randAlphaNum 48 -}}
{{- with lookup "v1" "Secret" .Release.Namespace $name -}}
{{- with index (.data | default dict) $f.secretKey -}}
{{- $key = b64dec . -}}
{{- end -}}
{{- end }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ $name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" . "component" "messages") | nindent 4 }}
  annotations:
    # Keep the key when the release is uninstalled and reinstalled: references stay good.
    helm.sh/resource-policy: keep
type: Opaque
stringData:
  {{ $f.secretKey }}: {{ $key | quote }}
{{- end }}
{{- end -}}

{{/* Name of the media blob claim. */}}
{{- define "oxigram.mediaClaimName" -}}
{{- .Values.media.persistence.existingClaim | default (printf "%s-blobs" (include "oxigram.resourceName" (dict "ctx" . "component" "media"))) -}}
{{- end -}}

{{/* The media blob claim, when persistence is on and no existing claim is given. */}}
{{- define "oxigram.mediaPvc" -}}
{{- $p := .Values.media.persistence -}}
{{- if and (include "oxigram.mediaOnVolume" .) $p.enabled (not $p.existingClaim) }}
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
