{{/* The operator image: repository@digest, else repository:tag. */}}
{{- define "bootc-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The users the admission policies name. */}}
{{- define "bootc-operator.controllerUser" -}}
system:serviceaccount:{{ .Values.namespaces.operator }}:{{ .Values.serviceAccounts.controller }}
{{- end -}}
{{- define "bootc-operator.daemonUser" -}}
system:serviceaccount:{{ .Values.namespaces.daemon }}:{{ .Values.serviceAccounts.daemon }}
{{- end -}}

{{- define "bootc-operator.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}
