{{- /* Lab stand-in helpers: names, namespace, image and API version as NVIDIA's chart v0.5.0
     computes them (templates/_helpers.tpl there); written for the lab. */ -}}
{{- define "standin.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "standin.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}
{{- define "standin.image" -}}
{{- .Values.image.repository -}}:{{- .Values.image.tag | default (printf "v%s" .Chart.AppVersion) -}}
{{- end -}}
{{- define "standin.resourceApiVersion" -}}
{{- if .Values.resourceApiVersion -}}{{- .Values.resourceApiVersion -}}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1" -}}resource.k8s.io/v1
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta2" -}}resource.k8s.io/v1beta2
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta1" -}}resource.k8s.io/v1beta1
{{- end -}}
{{- end -}}
{{- define "standin.featureGates" -}}
{{- range $key, $value := .Values.featureGates }}{{ $key }}={{ $value }},{{ end -}}
{{- end -}}
