{{/*
The parts both Deployments share: "dtq.redisEnv" the Redis URL from the
Secret, "dtq.extraEnv" a map of settings as env entries, and "dtq.podCommon"
(list . .Values.api) the pod's security context and scheduling settings.
*/}}
{{- define "dtq.redisEnv" -}}
- name: DTQ_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "dtq.secretName" . }}
      key: redis-url
{{- end -}}

{{- define "dtq.extraEnv" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{- define "dtq.podCommon" -}}
{{- $ := index . 0 -}}
{{- $c := index . 1 -}}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
