{{/*
Migrations as a step of their own (migrations.mode: job): a Helm pre-install/pre-upgrade
hook Job per service (one for the single binary, `--target all`) running `oxigram migrate`,
so a new version's schema is in place before its pods start. Services still migrate at
start; with nothing left to apply, that is a no-op.
*/}}

{{/*
A migration Job. Call with (dict "ctx" $ "component" C "target" T): C the component whose
environment (DSN) it uses, T the `--target` list.
*/}}
{{- define "oxigram.migrationJob" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values -}}
{{- $name := printf "%s-migrate-%s" (include "oxigram.fullname" $ctx) .component | trunc 63 | trimSuffix "-" -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $name }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" $ctx "component" "migrate") | nindent 4 }}
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "0"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  backoffLimit: {{ $v.migrations.backoffLimit | int }}
  activeDeadlineSeconds: {{ $v.migrations.activeDeadlineSeconds | int }}
  template:
    metadata:
      labels:
        {{- include "oxigram.labels" (dict "ctx" $ctx "component" "migrate") | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      restartPolicy: Never
      # Hooks run before the release's own objects exist, so the pod runs as the namespace's
      # default ServiceAccount, without its token.
      automountServiceAccountToken: false
      enableServiceLinks: false
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.priorityClassName }}
      priorityClassName: {{ . | quote }}
      {{- end }}
      securityContext:
        {{- toYaml $v.podSecurityContext | nindent 8 }}
      containers:
        - name: migrate
          image: {{ include "oxigram.image" $ctx | quote }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          command:
            - {{ $v.image.binary | quote }}
          args:
            - migrate
            - --target
            - {{ .target | quote }}
          env:
            {{- include "oxigram.env" (dict "ctx" $ctx "component" .component "values" (dict) "migration" true) | trim | nindent 12 }}
          {{- with $v.extraEnvFrom }}
          envFrom:
            {{- tpl (toYaml .) $ctx | nindent 12 }}
          {{- end }}
          {{- with ($v.migrations.resources | default (include "oxigram.resourcesPreset" (dict "ctx" $ctx "component" "migrate") | fromYaml)) }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $v.containerSecurityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if include "oxigram.configMapName" $ctx }}
            - name: config
              mountPath: /etc/oxigram/chart
              readOnly: true
            {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
        {{- with include "oxigram.configMapName" $ctx }}
        - name: config
          configMap:
            name: {{ . }}
        {{- end }}
{{- end -}}

{{/* The migration Jobs of the release, when migrations.mode is job. */}}
{{- define "oxigram.migrationJobs" -}}
{{- if eq .Values.migrations.mode "job" -}}
{{- if include "oxigram.singleBinary" . -}}
{{- include "oxigram.migrationJob" (dict "ctx" $ "component" "single-binary" "target" "all") }}
{{- else -}}
{{- range $i, $svc := include "oxigram.componentNames" . | splitList " " }}
{{- if $i }}
---
{{- end }}
{{ include "oxigram.migrationJob" (dict "ctx" $ "component" $svc "target" $svc) }}
{{- end }}
{{- end -}}
{{- end -}}
{{- end -}}
