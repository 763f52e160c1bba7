{{/* Labels on every object of the release. */}}
{{- define "corral.labels" -}}
app.kubernetes.io/name: corral
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* What selects the scheduler's pods. */}}
{{- define "corral.selector" -}}
app.kubernetes.io/name: corral
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{/* The image: repository, then @digest or :tag (default appVersion). */}}
{{- define "corral.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The SchedulerConfiguration file. */}}
{{- define "corral.config" -}}
{{- $le := merge (dict "namespace" .Release.Namespace) .Values.config.leaderElection -}}
{{- $cfg := merge (dict "apiVersion" "corral.dev/v1alpha1" "kind" "SchedulerConfiguration" "leaderElection" $le) (omit .Values.config "leaderElection") -}}
{{ toYaml $cfg }}
{{- end -}}
