{{/* The release's base name: <release> or <release>-dtq, at most 63 characters. */}}
{{- define "dtq.fullname" -}}
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

{{- define "dtq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "dtq.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "dtq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dtq
{{- end -}}

{{/* Selector labels of one component (api or worker): include "dtq.selector" (list . "api") */}}
{{- define "dtq.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "dtq.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "dtq.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "dtq.secretName" -}}
{{- .Values.secret.existingSecret | default (printf "%s-secrets" (include "dtq.fullname" .)) -}}
{{- end -}}

{{- define "dtq.apiService" -}}
{{- printf "%s-api" (include "dtq.fullname" .) -}}
{{- end -}}

{{/* The drain in seconds: DTQ_DRAIN_TIMEOUT_S, or dtq's default 30. */}}
{{- define "dtq.drainSeconds" -}}
{{- $w := .Values.worker.env | default dict -}}
{{- $c := .Values.config | default dict -}}
{{- $w.DTQ_DRAIN_TIMEOUT_S | default $c.DTQ_DRAIN_TIMEOUT_S | default 30 | int -}}
{{- end -}}

{{/*
The workers' termination grace: the value given, or the drain + 15 s. A
stopping worker may take 2 s past DTQ_DRAIN_TIMEOUT_S, so a grace not above
that sum is refused.
*/}}
{{- define "dtq.workerGrace" -}}
{{- $drain := include "dtq.drainSeconds" . | int -}}
{{- $grace := .Values.worker.terminationGracePeriodSeconds | default (add $drain 15) | int -}}
{{- if le $grace (add $drain 2 | int) -}}
{{- fail (printf "worker.terminationGracePeriodSeconds (%d) must be longer than DTQ_DRAIN_TIMEOUT_S (%d) + 2 s, or a rolling update kills running tasks" $grace $drain) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{/*
Checks a map of DTQ_* settings given in values (config, api.env, worker.env):
secrets and the addresses the chart sets have their own values.
*/}}
{{- define "dtq.checkSettings" -}}
{{- $where := index . 0 -}}
{{- range $k, $v := index . 1 -}}
{{- if not (hasPrefix "DTQ_" $k) -}}
{{- fail (printf "%s.%s: only DTQ_* settings go here (docs/configuration.md)" $where $k) -}}
{{- end -}}
{{- if has $k (list "DTQ_REDIS_URL" "DTQ_API_KEYS" "DTQ_API_KEY" "DTQ_LEASE_SECRET") -}}
{{- fail (printf "%s.%s: secrets go in secret (or secret.existingSecret), not in a ConfigMap" $where $k) -}}
{{- end -}}
{{- if has $k (list "DTQ_API_ADDR" "DTQ_WORKER_METRICS_ADDR" "DTQ_WORKER_CONCURRENCY") -}}
{{- fail (printf "%s.%s: the chart sets it from api.port, worker.metricsPort and worker.concurrency" $where $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The queues KEDA sizes the workers for: keda.queues, or the names of DTQ_QUEUES. */}}
{{- define "dtq.kedaQueues" -}}
{{- $qs := .Values.keda.queues -}}
{{- if not $qs -}}
{{- $w := .Values.worker.env | default dict -}}
{{- $spec := $w.DTQ_QUEUES | default .Values.config.DTQ_QUEUES | default "default" -}}
{{- $qs = list -}}
{{- range splitList "," $spec -}}
{{- $qs = append $qs (splitList ":" (trim .) | first) -}}
{{- end -}}
{{- end -}}
{{- join "," $qs -}}
{{- end -}}

{{/* Whether the chart makes the API keys itself (none given). */}}
{{- define "dtq.generatedKeys" -}}
{{- if and (not .Values.secret.existingSecret) (not .Values.secret.apiKeys) -}}true{{- end -}}
{{- end -}}
