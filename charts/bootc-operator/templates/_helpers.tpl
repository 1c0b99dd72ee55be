{{/* The operator image: repository@digest, else repository:tag. */}}
{{- define "bootc-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The operator's namespace: namespaces.operator, else the release's
(helm install -n NAME). */}}
{{- define "bootc-operator.operatorNamespace" -}}
{{ .Values.namespaces.operator | default .Release.Namespace }}
{{- end -}}

{{/* Does the chart template the operator's Namespace? Only when it is not
the release's: Helm owns that one (it exists before the chart's objects, or
--create-namespace makes it), and an object cannot be created twice. "true"
or "". */}}
{{- define "bootc-operator.ownsOperatorNamespace" -}}
{{- if and .Values.namespaces.create (ne (include "bootc-operator.operatorNamespace" .) .Release.Namespace) -}}
true
{{- end -}}
{{- end -}}

{{/* The standard labels of every object; `name` is the object's
app.kubernetes.io/name (its component's for the workloads, whose selectors
carry it alone: a selector never gains a label that changes). Helm-only
labels are tests/tests/chart.rs's HELM_ONLY list. */}}
{{- define "bootc-operator.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: bootc-operator
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* The documents of a file of deploy/ (text), each object given the
standard labels; its own labels win (a monitoring object's name is its
component's). (dict "ctx" $ "text" TEXT) */}}
{{- define "bootc-operator.labelled" -}}
{{- $ctx := .ctx }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" .text -1 }}
{{- $object := fromYaml $doc }}
{{- if hasKey $object "Error" }}
{{- fail (printf "a file of deploy/ does not parse: %s" $object.Error) }}
{{- end }}
{{- if $object }}
{{- $standard := include "bootc-operator.labels" (dict "ctx" $ctx "name" "bootc-operator") | fromYaml }}
{{- $own := $object.metadata.labels | default dict }}
{{- $_ := set $object.metadata "labels" (merge (deepCopy $own) $standard) }}
---
{{ toYaml $object }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The users the admission policies name. */}}
{{- define "bootc-operator.controllerUser" -}}
system:serviceaccount:{{ include "bootc-operator.operatorNamespace" . }}:{{ .Values.serviceAccounts.controller }}
{{- end -}}
{{- define "bootc-operator.daemonUser" -}}
system:serviceaccount:{{ .Values.namespaces.daemon }}:{{ .Values.serviceAccounts.daemon }}
{{- end -}}

{{- define "bootc-operator.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{/* The daemon's settings, the data of the ConfigMap bootc-daemon. Its
checksum is an annotation of the daemon's pod template: the daemons read
them when they start, so a change rolls them. */}}
{{- define "bootc-operator.daemonConfig" -}}
allowed-repositories: {{ join "," .Values.daemon.allowedRepositories | quote }}
enforce-container-sigpolicy: {{ .Values.daemon.enforceContainerSigpolicy | toString | quote }}
{{- end -}}
