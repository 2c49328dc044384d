{{/*
Shared helpers of the oxigram chart. The per-component folders (gateway/, messages/, …) only
call the `oxigram.component*` helpers below; single-binary/ calls the same building blocks
with the component name "single-binary".
*/}}

{{/* Chart name. */}}
{{- define "oxigram.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: `<release>-oxigram`, or the release name when it already contains the chart name. */}}
{{- define "oxigram.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* `name-version` for the helm.sh/chart label. */}}
{{- define "oxigram.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The six services, in one line; use with `splitList " "`. Their values live under the key of
the same name (`.Values.messages`, …).
*/}}
{{- define "oxigram.componentNames" -}}
gateway messages updates dialogs dispatch media
{{- end -}}

{{/* Name of a component's resources. Call with (dict "ctx" $ "component" "messages"). */}}
{{- define "oxigram.resourceName" -}}
{{- printf "%s-%s" (include "oxigram.fullname" .ctx) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels. Call with (dict "ctx" $ "component" "messages"); component may be empty. */}}
{{- define "oxigram.selectorLabels" -}}
app.kubernetes.io/name: {{ include "oxigram.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* Common labels. Call with (dict "ctx" $ "component" "messages"); component may be empty. */}}
{{- define "oxigram.labels" -}}
helm.sh/chart: {{ include "oxigram.chart" .ctx }}
{{ include "oxigram.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: oxigram
{{- end -}}

{{/* The image reference. */}}
{{- define "oxigram.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString (default .Chart.AppVersion .Values.image.tag)) -}}
{{- end -}}

{{- define "oxigram.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "oxigram.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* True (non-empty) when the chart must create its Secret (an inline DSN or Redis URL). */}}
{{- define "oxigram.createSecret" -}}
{{- if or (and .Values.database.url (not .Values.database.existingSecret)) (and .Values.redis.url (not .Values.redis.existingSecret)) -}}
true
{{- end -}}
{{- end -}}

{{/* The Secret holding the default DSN: the existing one, else the chart's. */}}
{{- define "oxigram.databaseSecretName" -}}
{{- .Values.database.existingSecret | default (include "oxigram.fullname" .) -}}
{{- end -}}

{{/* The Secret holding the Redis URL: the existing one, else the chart's. */}}
{{- define "oxigram.redisSecretName" -}}
{{- .Values.redis.existingSecret | default (include "oxigram.fullname" .) -}}
{{- end -}}

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
The environment of one container. Call with (dict "ctx" $ "component" C) where C is one of the
six services (distributed mode: listens on 0.0.0.0, dials the others through their Services)
or "single-binary" (every service in-process: listens and dials on 127.0.0.1, only the gateway
listens on 0.0.0.0).
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
{{- with $v.config.file }}
- name: OXIGRAM_CONFIG
  value: {{ . | quote }}
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
- name: OXIGRAM_REDIS_KEY_PREFIX
  value: {{ $v.redis.keyPrefix | quote }}
- name: OXIGRAM_DB_POOL_SIZE
  value: {{ $v.config.dbPoolSize | int | quote }}
- name: OXIGRAM_RPC_TIMEOUT_MS
  value: {{ $v.config.rpcTimeoutMs | int | quote }}
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
  value: {{ printf "http://%s:%d" (include "oxigram.resourceName" (dict "ctx" $ctx "component" $svc)) $port | quote }}
{{- end }}
{{- if or $single (eq $svc $component) }}
{{- include "oxigram.componentDatabaseEnv" (dict "ctx" $ctx "component" $svc) }}
{{- end }}
{{- end }}
{{- if or $single (eq $component "gateway") }}
{{- /* dispatch pushes to the very gateway pod that holds a device's stream */}}
- name: OXIGRAM_GATEWAY__ADVERTISE_PUSH
  value: {{ printf "http://$(POD_IP):%d" ($v.gateway.port | int) | quote }}
{{- end }}
{{- if or $single (eq $component "media") }}
- name: OXIGRAM_MEDIA__BLOB_DIR
  value: {{ $v.media.blobDir | quote }}
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

{{/* One gRPC-health probe. Call with (dict "port" 7711 "settings" .Values.probes.readiness). */}}
{{- define "oxigram.grpcProbe" -}}
grpc:
  port: {{ .port | int }}
{{ toYaml .settings }}
{{- end -}}

{{/*
A Deployment. Call with (dict "ctx" $ "component" C "values" V "target" T "port" P):
C the component ("single-binary" or a service), V its values, T the `--target` argument,
P the gRPC port its probes check.
*/}}
{{- define "oxigram.deployment" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values -}}
{{- $c := .values -}}
{{- $component := .component -}}
{{- $withMedia := or (eq $component "media") (eq $component "single-binary") -}}
{{- $autoscaled := dig "autoscaling" "enabled" false $c -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "oxigram.resourceName" (dict "ctx" $ctx "component" $component) }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "oxigram.labels" (dict "ctx" $ctx "component" $component) | nindent 4 }}
spec:
  {{- if not $autoscaled }}
  replicas: {{ $c.replicas | int }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    {{- if and $withMedia (include "oxigram.mediaSingleWriter" $ctx) }}
    # The blob volume can be mounted by one pod only: stop the old pod first.
    type: Recreate
    {{- else }}
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
    {{- end }}
  selector:
    matchLabels:
      {{- include "oxigram.selectorLabels" (dict "ctx" $ctx "component" $component) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "oxigram.labels" (dict "ctx" $ctx "component" $component) | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- $annotations := merge (dict) ($c.podAnnotations | default (dict)) ($v.podAnnotations | default (dict)) }}
      {{- if include "oxigram.createSecret" $ctx }}
      {{- $_ := set $annotations "checksum/secret" (include (print $ctx.Template.BasePath "/secret.yaml") $ctx | sha256sum) }}
      {{- end }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "oxigram.serviceAccountName" $ctx }}
      automountServiceAccountToken: {{ $v.serviceAccount.automountServiceAccountToken }}
      enableServiceLinks: false
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $v.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds | int }}
      containers:
        - name: {{ ternary "oxigram" $component (eq $component "single-binary") }}
          image: {{ include "oxigram.image" $ctx | quote }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          command:
            - {{ $v.image.binary | quote }}
          args:
            - serve
            - --target
            - {{ .target | quote }}
          ports:
            - name: grpc
              containerPort: {{ .port | int }}
              protocol: TCP
            {{- if $v.metrics.enabled }}
            - name: http-metrics
              containerPort: {{ $v.metrics.port | int }}
              protocol: TCP
            {{- end }}
          env:
            {{- include "oxigram.env" (dict "ctx" $ctx "component" $component "values" $c) | trim | nindent 12 }}
          startupProbe:
            {{- include "oxigram.grpcProbe" (dict "port" .port "settings" $v.probes.startup) | nindent 12 }}
          readinessProbe:
            {{- include "oxigram.grpcProbe" (dict "port" .port "settings" $v.probes.readiness) | nindent 12 }}
          livenessProbe:
            {{- include "oxigram.grpcProbe" (dict "port" .port "settings" $v.probes.liveness) | nindent 12 }}
          {{- with $c.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $v.containerSecurityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if $withMedia }}
            - name: media-blobs
              mountPath: {{ $v.media.blobDir }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
        {{- if $withMedia }}
        - name: media-blobs
          {{- if $v.media.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ include "oxigram.mediaClaimName" $ctx }}
          {{- else if $v.media.emptyDirSizeLimit }}
          emptyDir:
            sizeLimit: {{ $v.media.emptyDirSizeLimit }}
          {{- else }}
          emptyDir: {}
          {{- end }}
        {{- end }}
      {{- with $c.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

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

{{/* A PodDisruptionBudget, when enabled. Call with (dict "ctx" $ "component" C "values" V). */}}
{{- define "oxigram.pdb" -}}
{{- $c := .values -}}
{{- if dig "podDisruptionBudget" "enabled" false $c }}
apiVersion: policy/v1
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

{{/* True (non-empty) in distributed mode. */}}
{{- define "oxigram.distributed" -}}
{{- if eq .Values.deploymentMode "distributed" -}}
true
{{- end -}}
{{- end -}}

{{/* True (non-empty) in singleBinary mode. */}}
{{- define "oxigram.singleBinary" -}}
{{- if eq .Values.deploymentMode "singleBinary" -}}
true
{{- end -}}
{{- end -}}

{{/*
The thin per-component entry points, each rendered only in distributed mode.
Call with (dict "ctx" $ "component" "messages").
*/}}
{{- define "oxigram.componentDeployment" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- $c := index .ctx.Values .component -}}
{{- include "oxigram.deployment" (dict "ctx" .ctx "component" .component "values" $c "target" .component "port" $c.port) -}}
{{- end -}}
{{- end -}}

{{- define "oxigram.componentService" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- $c := index .ctx.Values .component -}}
{{- include "oxigram.service" (dict "ctx" .ctx "component" .component "values" $c "port" $c.port) -}}
{{- end -}}
{{- end -}}

{{- define "oxigram.componentHpa" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- $c := index .ctx.Values .component -}}
{{- if $c.autoscaling.enabled }}
apiVersion: autoscaling/v2
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

{{- define "oxigram.componentPdb" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- include "oxigram.pdb" (dict "ctx" .ctx "component" .component "values" (index .ctx.Values .component)) -}}
{{- end -}}
{{- end -}}

{{- define "oxigram.componentServiceMonitor" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- include "oxigram.serviceMonitor" . -}}
{{- end -}}
{{- end -}}
