{{/*
The configuration of a process: oxigram reads its settings from OXIGRAM_* environment
variables (nested keys joined by `__`), and these helpers derive them from the values.
*/}}

{{/*
This service's own DSN (OXIGRAM_SERVICES__<SVC>__DATABASE_URL), when `<svc>.database` sets
`existingSecret` or `secretKey`. Call with (dict "ctx" $ "component" "messages").
*/}}
{{- define "oxigram.componentDatabaseEnv" -}}
{{- $db := (index .ctx.Values .component).database | default (dict) -}}
{{- if or $db.existingSecret $db.secretKey }}
- name: OXIGRAM_SERVICES__{{ upper .component }}__DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $db.existingSecret | default (include "oxigram.databaseSecretName" .ctx) }}
      key: {{ $db.secretKey | default .ctx.Values.database.secretKey }}
{{- end }}
{{- end -}}

{{/*
The environment of one container. Call with (dict "ctx" $ "component" C "values" V) where C is
one of the six services (distributed mode: it listens on 0.0.0.0 and dials the others through
their Services) or "single-binary". In the single binary the services call each other
in-process (oxigram_kit::local finds a callee served in the same process by its endpoint), so
the 127.0.0.1 endpoints are only the names those calls go by; each service still listens on
127.0.0.1:<port> for probes and tools, the gateway on 0.0.0.0. Dispatch pushes to the gateway
pod holding a device's stream at its advertised pod address, over the network (it may be
another replica). A migration Job's container adds "migration" true: it gets no admin token
and no media settings (its Job may run before the chart's Secrets exist).
*/}}
{{- define "oxigram.env" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values -}}
{{- $component := .component -}}
{{- $single := eq $component "single-binary" -}}
{{- if or $single (eq $component "gateway") }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end }}
{{- if include "oxigram.configMapName" $ctx }}
- name: OXIGRAM_CONFIG
  value: /etc/oxigram/chart/oxigram.toml
{{- else if $v.config.file }}
- name: OXIGRAM_CONFIG
  value: {{ $v.config.file | quote }}
{{- end }}
{{- if or $v.database.existingSecret $v.database.url }}
- name: OXIGRAM_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "oxigram.databaseSecretName" $ctx }}
      key: {{ $v.database.secretKey }}
{{- end }}
- name: OXIGRAM_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "oxigram.redisSecretName" $ctx }}
      key: {{ $v.redis.secretKey }}
{{- if and (or $v.admin.existingSecret $v.admin.token) (not .migration) }}
{{- /* every service owns an outbox and serves its admin API; `oxigram migrate` needs no token */}}
- name: OXIGRAM_ADMIN__TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "oxigram.adminSecretName" $ctx }}
      key: {{ $v.admin.secretKey }}
{{- end }}
- name: OXIGRAM_REDIS_KEY_PREFIX
  value: {{ $v.redis.keyPrefix | quote }}
- name: OXIGRAM_DB_POOL_SIZE
  value: {{ $v.config.dbPoolSize | int | quote }}
- name: OXIGRAM_RPC_TIMEOUT_MS
  value: {{ $v.config.rpcTimeoutMs | int | quote }}
- name: OXIGRAM_BALANCING__ENDPOINT_REFRESH_MS
  value: {{ $v.balancing.endpointRefreshMs | int | quote }}
- name: OXIGRAM_BALANCING__SHUTDOWN_DRAIN_MS
  value: {{ $v.balancing.shutdownDrainMs | int | quote }}
{{- range $svc := include "oxigram.componentNames" $ctx | splitList " " }}
{{- $port := (index $v $svc).port | int }}
{{- if $single }}
- name: OXIGRAM_SERVICES__{{ upper $svc }}__LISTEN
  value: {{ printf "%s:%d" (ternary "0.0.0.0" "127.0.0.1" (eq $svc "gateway")) $port | quote }}
- name: OXIGRAM_SERVICES__{{ upper $svc }}__ENDPOINT
  value: {{ printf "http://127.0.0.1:%d" $port | quote }}
{{- else }}
{{- if eq $svc $component }}
- name: OXIGRAM_SERVICES__{{ upper $svc }}__LISTEN
  value: {{ printf "0.0.0.0:%d" $port | quote }}
{{- end }}
- name: OXIGRAM_SERVICES__{{ upper $svc }}__ENDPOINT
  value: {{ printf "http://%s:%d" (include "oxigram.headlessName" (dict "ctx" $ctx "component" $svc)) $port | quote }}
{{- end }}
{{- if or $single (eq $svc $component) }}
{{- include "oxigram.componentDatabaseEnv" (dict "ctx" $ctx "component" $svc) }}
{{- end }}
{{- end }}
{{- if and (or $single (eq $component "gateway")) $v.helmTest.loginCode }}
{{- /* every sign-in accepts this code: for the smoke test of test and staging installations */}}
- name: OXIGRAM_GATEWAY__FIXED_LOGIN_CODE
  value: {{ printf "%q" (toString $v.helmTest.loginCode) | quote }}
{{- end }}
{{- if or $single (eq $component "gateway") }}
{{- /* dispatch pushes to the very gateway pod that holds a device's stream */}}
- name: OXIGRAM_GATEWAY__ADVERTISE_PUSH
  value: {{ printf "http://$(POD_IP):%d" ($v.gateway.port | int) | quote }}
{{- end }}
{{- if and (or $single (eq $component "media")) (not .migration) }}
{{- $s3 := $v.media.s3 }}
{{- if $s3.bucket }}
{{- /* string settings are quoted as TOML strings: the environment's values are typed */}}
- name: OXIGRAM_MEDIA__S3__BUCKET
  value: {{ printf "%q" $s3.bucket | quote }}
- name: OXIGRAM_MEDIA__S3__ENDPOINT
  value: {{ printf "%q" $s3.endpoint | quote }}
- name: OXIGRAM_MEDIA__S3__REGION
  value: {{ printf "%q" $s3.region | quote }}
- name: OXIGRAM_MEDIA__S3__ALLOW_HTTP
  value: {{ $s3.allowHttp | toString | quote }}
{{- with $s3.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $s3.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $s3.secretAccessKeyKey }}
{{- end }}
{{- else }}
- name: OXIGRAM_MEDIA__BLOB_DIR
  value: {{ $v.media.blobDir | quote }}
{{- end }}
- name: OXIGRAM_MEDIA__GC_GRACE_SECONDS
  value: {{ $v.media.gc.graceSeconds | int | quote }}
- name: OXIGRAM_MEDIA__GC_INTERVAL_SECONDS
  value: {{ $v.media.gc.intervalSeconds | int | quote }}
{{- end }}
{{- if and (or $single (eq $component "messages")) (not .migration) }}
{{- /* the messages service signs file references and checks them */}}
- name: OXIGRAM_MEDIA__FILE_REFERENCE_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "oxigram.fileReferenceSecretName" $ctx }}
      key: {{ $v.media.fileReference.secretKey }}
- name: OXIGRAM_MEDIA__FILE_REFERENCE_TTL_SECONDS
  value: {{ $v.media.fileReference.ttlSeconds | int | quote }}
{{- end }}
{{- if $v.metrics.enabled }}
- name: OXIGRAM_METRICS_ADDR
  value: {{ printf "0.0.0.0:%d" ($v.metrics.port | int) | quote }}
{{- end }}
{{- with $v.otlp.endpoint }}
- name: OXIGRAM_TELEMETRY__OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: OXIGRAM_TELEMETRY__LOG_FORMAT
  value: {{ $v.telemetry.logFormat | quote }}
- name: OXIGRAM_TELEMETRY__LOG_FILTER
  value: {{ $v.telemetry.logFilter | quote }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with .values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
