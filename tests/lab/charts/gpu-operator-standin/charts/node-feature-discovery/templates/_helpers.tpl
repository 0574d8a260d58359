{{- /* Lab stand-in: the pod spec pieces every NFD workload shares. */ -}}
{{- define "nfd-standin.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- /* this chart's imagePullSecrets, else global.imagePullSecrets (objects, as in the real helper) */ -}}
{{- define "nfd-standin.pullSecrets" -}}
{{- $secrets := .Values.imagePullSecrets | default list -}}
{{- if and (not $secrets) .Values.global -}}{{- $secrets = .Values.global.imagePullSecrets | default list -}}{{- end -}}
{{- toJson $secrets -}}
{{- end -}}
