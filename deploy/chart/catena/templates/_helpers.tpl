{{/*
The labels of every object. The selector's (name and component) never
change: a DaemonSet's selector is immutable.
*/}}
{{- define "catena.labels" -}}
app.kubernetes.io/name: catena
{{- end }}

{{- define "catena.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* A host path and its volume, mounted at the same path. */}}
{{- define "catena.hostPath" -}}
- name: {{ .name }}
  hostPath:
    path: {{ .path }}
    type: {{ .type | default "DirectoryOrCreate" }}
{{- end }}

{{/* under PATH DIR: PATH is DIR or below it. */}}
{{- define "catena.under" -}}
{{- $p := clean (index . 0) -}}{{- $d := clean (index . 1) -}}
{{- if or (eq $p $d) (hasPrefix (printf "%s/" (trimSuffix "/" $d)) $p) }}true{{ end -}}
{{- end }}

{{/* The ConfigMap's data: values.yaml says what each is. */}}
{{- define "catena.options" -}}
CATENA_AGENT_PRIMARY_CONF: {{ .Values.primary.conf | quote }}
CATENA_AGENT_NETWORK_DIR_PLUGINS: {{ .Values.primary.networkDirPlugins | quote }}
CATENA_AGENT_DELEGATE_VERSIONS: {{ .Values.primary.delegateVersions | quote }}
CATENA_AGENT_LOCK_TIMEOUT: {{ .Values.catena.lockTimeout | quote }}
CATENA_AGENT_DELEGATE_TIMEOUT: {{ .Values.catena.delegateTimeout | quote }}
CATENA_AGENT_GC_GRACE_PERIOD: {{ .Values.catena.gcGracePeriod | quote }}
CATENA_AGENT_SLOW_THRESHOLD: {{ .Values.catena.slowThreshold | quote }}
CATENA_AGENT_CATENA_LOG_LEVEL: {{ .Values.catena.logLevel | quote }}
CATENA_AGENT_LOG_LEVEL: {{ .Values.agent.logLevel | quote }}
CATENA_AGENT_UNINSTALL_ON_DELETE: {{ if .Values.agent.uninstallOnDelete }}{{ printf "%s/catena-agent" .Release.Namespace | quote }}{{ else }}""{{ end }}
CATENA_AGENT_RUNTIME_ENDPOINT: {{ .Values.runtime.endpoint | quote }}
CATENA_AGENT_RECONCILE_INTERVAL: {{ .Values.reconcile.interval | quote }}
CATENA_AGENT_GRACE: {{ .Values.reconcile.grace | quote }}
CATENA_AGENT_ABANDON_AFTER: {{ .Values.reconcile.abandonAfter | quote }}
CATENA_AGENT_LEAK_INTERVAL: {{ .Values.leaks.interval | quote }}
CATENA_AGENT_LEAK_MIN_AGE: {{ .Values.leaks.minAge | quote }}
CATENA_AGENT_RELEASE_LEAKS_AFTER: {{ .Values.leaks.releaseAfter | quote }}
CATENA_AGENT_EVENTS: {{ .Values.events.enabled | quote }}
CATENA_AGENT_EVENTS_HELD_THRESHOLD: {{ .Values.events.heldThreshold | quote }}
CATENA_AGENT_SECURE_METRICS_PORT: {{ .Values.metrics.securePort | quote }}
CATENA_AGENT_SECURE_METRICS_CERT_DIR: {{ if .Values.metrics.secureCertSecret }}"/etc/catena/metrics-tls"{{ else }}""{{ end }}
{{- end }}
