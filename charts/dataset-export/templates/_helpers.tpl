{{/* The four services, in dependency order. */}}
{{- define "dataset-export.components" -}}
gateway catalog export schema
{{- end -}}

{{- define "dataset-export.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dataset-export.fullname" -}}
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

{{/* Name of a component's objects: <fullname>-<component>. Call with (dict "root" $ "component" "gateway"). */}}
{{- define "dataset-export.componentName" -}}
{{- printf "%s-%s" (include "dataset-export.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dataset-export.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "dataset-export.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dataset-export
{{- end -}}

{{/* Selector labels of a component. Call with (dict "root" $ "component" "gateway"). */}}
{{- define "dataset-export.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dataset-export.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dataset-export.componentLabels" -}}
{{ include "dataset-export.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dataset-export.image" -}}
{{- printf "%s-%s:%s" .root.Values.image.repositoryPrefix .component (.root.Values.image.tag | default .root.Chart.AppVersion) -}}
{{- end -}}

{{- define "dataset-export.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dataset-export.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dataset-export.secretName" -}}
{{- default (printf "%s-secrets" (include "dataset-export.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* gRPC address of a component inside the namespace: <service>:<port>. */}}
{{- define "dataset-export.grpcAddress" -}}
{{- printf "%s:%v" (include "dataset-export.componentName" .) (index .root.Values .component).grpcPort -}}
{{- end -}}

{{/* The OTEL_* variables shared by every service. Call with (dict "root" $ "component" "gateway"). */}}
{{- define "dataset-export.otelEnv" -}}
{{- $otel := .root.Values.config.otel }}
OTEL_SERVICE_NAME: {{ printf "dataset-export-%s" .component | quote }}
{{- with $otel.tracesExporter }}
OTEL_TRACES_EXPORTER: {{ . | quote }}
{{- end }}
{{- with $otel.endpoint }}
OTEL_EXPORTER_OTLP_ENDPOINT: {{ . | quote }}
{{- end }}
OTEL_EXPORTER_OTLP_PROTOCOL: {{ $otel.protocol | quote }}
OTEL_TRACES_SAMPLER: {{ $otel.sampler | quote }}
OTEL_TRACES_SAMPLER_ARG: {{ $otel.samplerArg | quote }}
OTEL_METRICS_EXPORTER: "none"
OTEL_LOGS_EXPORTER: "none"
{{- with $otel.resourceAttributes }}
OTEL_RESOURCE_ATTRIBUTES: {{ . | quote }}
{{- end }}
{{- range $name, $value := $otel.extraEnv }}
{{ $name }}: {{ $value | quote }}
{{- end }}
{{- end -}}
