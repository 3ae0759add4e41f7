{{- define "jetplane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "jetplane.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "jetplane.labels" -}}
{{ include "jetplane.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "jetplane.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "jetplane.embedded" -}}
{{- if eq .Values.nats.mode "embedded" }}true{{ end -}}
{{- end -}}

{{- define "jetplane.replicas" -}}
{{- if include "jetplane.embedded" . -}}
{{ .Values.nats.embedded.replicas }}
{{- else -}}
{{ .Values.nats.external.replicas }}
{{- end -}}
{{- end -}}

{{/* The jetplane container, shared by the StatefulSet and the Deployment. */}}
{{- define "jetplane.container" -}}
- name: jetplane
  image: {{ include "jetplane.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args:
  - serve
  - --listen=0.0.0.0:{{ .Values.api.port }}
  - --log-format={{ .Values.logFormat }}
  - --log-level={{ .Values.logLevel }}
  - --partitions={{ .Values.partitions }}
  {{- if .Values.kubernetes.enabled }}
  - --clusters=/etc/jetplane/clusters.yaml
  {{- end }}
  {{- if .Values.api.tokenSecret }}
  - --token-file=/etc/jetplane/tokens/tokens
  {{- else if .Values.api.allowAnonymous }}
  - --allow-anonymous
  {{- else }}
  {{- fail "api.tokenSecret is required: the API listens on the pod network, and without tokens every caller is admin. Create a Secret with key \"tokens\" (lines of TOKEN NAME [ROLE [NAMESPACES]]) and set api.tokenSecret, or set api.allowAnonymous=true to run the API open on purpose." }}
  {{- end }}
  {{- if include "jetplane.embedded" . }}
  {{- $e := .Values.nats.embedded }}
  - --data=/data
  - --sync={{ $e.sync }}
  - --nats-host=0.0.0.0
  - --nats-port={{ $e.clientPort }}
  - --replicas={{ $e.replicas }}
  {{- if gt (int $e.replicas) 1 }}
  - --nats-name=$(POD_NAME)
  - --nats-cluster={{ $e.clusterName }}
  - --nats-cluster-listen=0.0.0.0:{{ $e.routePort }}
  {{- $fullname := include "jetplane.fullname" . }}
  {{- $routes := list }}
  {{- range $i := until (int $e.replicas) }}
  {{- $routes = append $routes (printf "nats://%s-%d.%s-nats.%s.svc:%d" $fullname $i $fullname $.Release.Namespace (int $e.routePort)) }}
  {{- end }}
  - --nats-routes={{ join "," $routes }}
  {{- if not $e.routeSecret }}
  {{- fail "nats.embedded.routeSecret is required with more than one replica: a NATS route is a peer server, trusted beyond every credential, so the nodes must prove to each other that they belong. Create a Secret with key \"secret\" (openssl rand -hex 16) and set nats.embedded.routeSecret to its name." }}
  {{- end }}
  - --nats-route-secret-file=/etc/jetplane/nats-routes/secret
  {{- end }}
  {{- else }}
  {{- $x := .Values.nats.external }}
  - --nats-url={{ required "nats.external.url is required with nats.mode external" $x.url }}
  - --replicas={{ $x.streamReplicas }}
  {{- if $x.credsSecret }}
  - --nats-creds=/etc/jetplane/nats/creds
  {{- end }}
  {{- if $x.tlsSecret }}
  - --nats-ca=/etc/jetplane/nats-tls/ca.crt
  - --nats-cert=/etc/jetplane/nats-tls/tls.crt
  - --nats-key=/etc/jetplane/nats-tls/tls.key
  {{- end }}
  {{- end }}
  env:
  - name: POD_NAME
    valueFrom: {fieldRef: {fieldPath: metadata.name}}
  - name: GOMEMLIMIT
    valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: "1"}}
  ports:
  - {name: api, containerPort: {{ .Values.api.port }}, protocol: TCP}
  {{- if include "jetplane.embedded" . }}
  - {name: nats, containerPort: {{ .Values.nats.embedded.clientPort }}, protocol: TCP}
  - {name: routes, containerPort: {{ .Values.nats.embedded.routePort }}, protocol: TCP}
  {{- end }}
  startupProbe:
    httpGet: {path: /healthz, port: api}
    periodSeconds: 2
    failureThreshold: 90
  livenessProbe:
    httpGet: {path: /healthz, port: api}
    periodSeconds: 10
    failureThreshold: 3
  readinessProbe:
    httpGet: {path: /readyz, port: api}
    periodSeconds: 5
    failureThreshold: 2
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
  - {name: tmp, mountPath: /tmp}
  {{- if include "jetplane.embedded" . }}
  - {name: data, mountPath: /data}
  {{- end }}
  {{- if .Values.kubernetes.enabled }}
  - {name: config, mountPath: /etc/jetplane/clusters.yaml, subPath: clusters.yaml, readOnly: true}
  {{- end }}
  {{- if .Values.api.tokenSecret }}
  - {name: tokens, mountPath: /etc/jetplane/tokens, readOnly: true}
  {{- end }}
  {{- if and (include "jetplane.embedded" .) (gt (int .Values.nats.embedded.replicas) 1) }}
  - {name: nats-routes, mountPath: /etc/jetplane/nats-routes, readOnly: true}
  {{- end }}
  {{- if and (not (include "jetplane.embedded" .)) .Values.nats.external.credsSecret }}
  - {name: nats-creds, mountPath: /etc/jetplane/nats, readOnly: true}
  {{- end }}
  {{- if and (not (include "jetplane.embedded" .)) .Values.nats.external.tlsSecret }}
  - {name: nats-tls, mountPath: /etc/jetplane/nats-tls, readOnly: true}
  {{- end }}
{{- end -}}

{{/* Pod spec fields beside the container. */}}
{{- define "jetplane.podSpec" -}}
serviceAccountName: {{ include "jetplane.fullname" . }}
automountServiceAccountToken: {{ .Values.kubernetes.enabled }}
enableServiceLinks: false
terminationGracePeriodSeconds: 30
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
  {{- if .Values.affinity }}
  {{- toYaml .Values.affinity | nindent 2 }}
  {{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "jetplane.selectorLabels" . | nindent 12 }}
  {{- end }}
containers:
{{ include "jetplane.container" . }}
volumes:
- {name: tmp, emptyDir: {sizeLimit: 64Mi}}
{{- if .Values.kubernetes.enabled }}
- name: config
  configMap: {name: {{ include "jetplane.fullname" . }}}
{{- end }}
{{- if .Values.api.tokenSecret }}
- name: tokens
  secret: {secretName: {{ .Values.api.tokenSecret }}}
{{- end }}
{{- if and (include "jetplane.embedded" .) (gt (int .Values.nats.embedded.replicas) 1) }}
- name: nats-routes
  secret: {secretName: {{ .Values.nats.embedded.routeSecret }}}
{{- end }}
{{- if and (not (include "jetplane.embedded" .)) .Values.nats.external.credsSecret }}
- name: nats-creds
  secret: {secretName: {{ .Values.nats.external.credsSecret }}}
{{- end }}
{{- if and (not (include "jetplane.embedded" .)) .Values.nats.external.tlsSecret }}
- name: nats-tls
  secret: {secretName: {{ .Values.nats.external.tlsSecret }}}
{{- end }}
{{- end -}}
