{{- define "moltscope.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "moltscope.fullname" -}}
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

{{- define "moltscope.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "moltscope.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: include "moltscope.selector" (list . "api") */}}
{{- define "moltscope.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "moltscope.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "moltscope.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "moltscope.kafkaUrl" -}}
{{- if .Values.kafka.enabled -}}
{{- printf "kafka://%s-kafka:9092" (include "moltscope.fullname" .) -}}
{{- else -}}
{{- required "kafka.externalUrl is required when kafka.enabled is false" .Values.kafka.externalUrl -}}
{{- end -}}
{{- end -}}

{{- define "moltscope.redisUrl" -}}
{{- if .Values.redis.enabled -}}
{{- printf "redis://%s-redis:6379/0" (include "moltscope.fullname" .) -}}
{{- else -}}
{{- required "redis.externalUrl is required when redis.enabled is false" .Values.redis.externalUrl -}}
{{- end -}}
{{- end -}}

{{- define "moltscope.secretName" -}}
{{- default (include "moltscope.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The environment of every moltscope container: the ConfigMap plus the optional secrets. */}}
{{- define "moltscope.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "moltscope.fullname" . }}
env:
  - name: MOLTSCOPE_API_TOKEN
    valueFrom:
      secretKeyRef:
        name: {{ include "moltscope.secretName" . }}
        key: MOLTSCOPE_API_TOKEN
        optional: true
  - name: MOLTBOOK_API_KEY
    valueFrom:
      secretKeyRef:
        name: {{ include "moltscope.secretName" . }}
        key: MOLTBOOK_API_KEY
        optional: true
{{- end -}}

{{/* Restart pods when the configuration or the secrets change. */}}
{{- define "moltscope.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end -}}

{{/* Creates the topics with their partition counts (idempotent) before the process starts. */}}
{{- define "moltscope.topicsInit" -}}
- name: topics
  image: {{ include "moltscope.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["python", "-c", "from service.config import get_settings; from service.producer import ensure_topics; ensure_topics(get_settings())"]
  {{- include "moltscope.env" . | nindent 2 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
{{- end -}}
