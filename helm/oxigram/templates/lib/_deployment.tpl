{{/*
Deployments: the one pod template (used by the six services in distributed mode and by the
single binary) and its per-service entry point.
*/}}

{{/*
One probe of the gRPC health service (service name ""). Kubernetes 1.24+ probes gRPC itself;
on older clusters the probe runs `oxigram health`, which makes the same call from inside the
container. Call with (dict "ctx" $ "port" 7711 "settings" .Values.probes.readiness).
*/}}
{{- define "oxigram.grpcProbe" -}}
{{- if include "oxigram.hasGrpcProbes" .ctx }}
grpc:
  port: {{ .port | int }}
{{- else }}
exec:
  command:
    - {{ .ctx.Values.image.binary | quote }}
    - health
    - --endpoint
    - {{ printf "http://127.0.0.1:%d" (.port | int) | quote }}
    - --timeout-ms
    - {{ mul (.settings.timeoutSeconds | int) 1000 | quote }}
{{- end }}
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
{{- /* the blob volume, for the process that runs the media service without a bucket */ -}}
{{- $withMedia := and (or (eq $component "media") (eq $component "single-binary")) (include "oxigram.mediaOnVolume" $ctx) -}}
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
  revisionHistoryLimit: {{ $v.rollout.revisionHistoryLimit | int }}
  minReadySeconds: {{ $v.rollout.minReadySeconds | int }}
  strategy:
    {{- if and $withMedia (include "oxigram.mediaSingleWriter" $ctx) }}
    # The blob volume can be mounted by one pod only: stop the old pod first.
    type: Recreate
    {{- else }}
    type: RollingUpdate
    rollingUpdate:
      maxSurge: {{ $v.rollout.maxSurge }}
      maxUnavailable: {{ $v.rollout.maxUnavailable }}
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
      {{- if $v.config.inline }}
      {{- $_ := set $annotations "checksum/config" (include (print $ctx.Template.BasePath "/configmap.yaml") $ctx | sha256sum) }}
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
      {{- with $v.priorityClassName }}
      priorityClassName: {{ . | quote }}
      {{- end }}
      {{- with $v.initContainers }}
      initContainers:
        {{- tpl (toYaml .) $ctx | nindent 8 }}
      {{- end }}
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
          {{- with $v.extraEnvFrom }}
          envFrom:
            {{- tpl (toYaml .) $ctx | nindent 12 }}
          {{- end }}
          startupProbe:
            {{- include "oxigram.grpcProbe" (dict "ctx" $ctx "port" .port "settings" $v.probes.startup) | trim | nindent 12 }}
          readinessProbe:
            {{- include "oxigram.grpcProbe" (dict "ctx" $ctx "port" .port "settings" $v.probes.readiness) | trim | nindent 12 }}
          livenessProbe:
            {{- include "oxigram.grpcProbe" (dict "ctx" $ctx "port" .port "settings" $v.probes.liveness) | trim | nindent 12 }}
          {{- with ($c.resources | default (include "oxigram.resourcesPreset" (dict "ctx" $ctx "component" $component) | fromYaml)) }}
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
            {{- if include "oxigram.configMapName" $ctx }}
            - name: config
              mountPath: /etc/oxigram/chart
              readOnly: true
            {{- end }}
            {{- with $v.extraVolumeMounts }}
            {{- tpl (toYaml .) $ctx | nindent 12 }}
            {{- end }}
          {{- /* No preStop sleep is needed: on SIGTERM the process itself turns NOT_SERVING
          and keeps serving for balancing.shutdownDrainMs while the endpoints and its callers
          drop it, then finishes the calls in flight. */}}
          {{- with $v.lifecycle }}
          lifecycle:
            {{- toYaml . | nindent 12 }}
          {{- end }}
        {{- with $v.extraContainers }}
        {{- tpl (toYaml .) $ctx | nindent 8 }}
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
        {{- with include "oxigram.configMapName" $ctx }}
        - name: config
          configMap:
            name: {{ . }}
        {{- end }}
        {{- with $v.extraVolumes }}
        {{- tpl (toYaml .) $ctx | nindent 8 }}
        {{- end }}
      {{- with $c.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with ($c.affinity | default (include "oxigram.defaultAffinity" (dict "ctx" $ctx "component" $component) | fromYaml)) }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with ($c.topologySpreadConstraints | default (include "oxigram.defaultTopologySpread" (dict "ctx" $ctx "component" $component) | fromYamlArray)) }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/*
A service's Deployment, rendered only in distributed mode.
Call with (dict "ctx" $ "component" "messages").
*/}}
{{- define "oxigram.componentDeployment" -}}
{{- if include "oxigram.distributed" .ctx -}}
{{- $c := index .ctx.Values .component -}}
{{- include "oxigram.deployment" (dict "ctx" .ctx "component" .component "values" $c "target" .component "port" $c.port) -}}
{{- end -}}
{{- end -}}
