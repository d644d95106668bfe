{{/* The chart's name, or nameOverride: app.kubernetes.io/name. */}}
{{- define "evictd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/*
The name of every object: the release name, with "-evictd" unless the
release name holds it already (release "evictd" gives "evictd").
*/}}
{{- define "evictd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "evictd.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The name of the cluster-scoped objects (ClusterRole, ClusterRoleBinding):
the fullname and the release namespace, since two releases of the same name
in two namespaces would otherwise share one ClusterRole.
*/}}
{{- define "evictd.clusterName" -}}
{{- printf "%s-%s" (include "evictd.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" -}}
{{- end }}

{{/* The node leases' namespace: nodeLease.namespace, else the release's. */}}
{{- define "evictd.leaseNamespace" -}}
{{- default .Release.Namespace .Values.nodeLease.namespace -}}
{{- end }}

{{- define "evictd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "evictd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the ServiceAccount to run as, when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end }}

{{/* The labels that select this release's pods; they never change. */}}
{{- define "evictd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "evictd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object: the standard ones and commonLabels. */}}
{{- define "evictd.labels" -}}
{{- include "evictd.labelSet" (dict "ctx" . "pod" (dict)) -}}
{{- end }}

{{/* Labels of the pod template: those of every object and podLabels. */}}
{{- define "evictd.podLabels" -}}
{{- include "evictd.labelSet" (dict "ctx" . "pod" (.Values.podLabels | default dict)) -}}
{{- end }}

{{/*
One map, so that a key set twice renders once (two blocks of YAML side by
side would repeat it): podLabels win over commonLabels, which win over the
standard labels. The selector labels are refused in either, since a
DaemonSet's selector cannot change and pods must keep matching it.
*/}}
{{- define "evictd.labelSet" -}}
{{- $c := .ctx -}}
{{- $common := $c.Values.commonLabels | default dict -}}
{{- $sel := dict "app.kubernetes.io/name" (include "evictd.name" $c) "app.kubernetes.io/instance" $c.Release.Name -}}
{{- range $what, $m := dict "commonLabels" $common "podLabels" .pod -}}
{{- range $k, $_ := $m -}}
{{- if hasKey $sel $k -}}
{{- fail (printf "%s: %q is a selector label, set by the chart from the release name and nameOverride; a DaemonSet's selector cannot change, so it cannot be set here" $what $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $std := dict "helm.sh/chart" (printf "%s-%s" $c.Chart.Name $c.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-") "app.kubernetes.io/version" ($c.Values.image.tag | default $c.Chart.AppVersion | trunc 63 | trimSuffix "-") "app.kubernetes.io/managed-by" $c.Release.Service -}}
{{- toYaml (merge (dict) $sel .pod $common $std) -}}
{{- end }}

{{/* repository@digest when a digest is set, else repository:tag. */}}
{{- define "evictd.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
GOMEMLIMIT: goMemLimit when set, else 7/8 of the memory limit, else nothing.
The limit is a Kubernetes quantity; the binary suffixes and the decimal ones
are converted to bytes here, since Helm has no quantity parser.
*/}}
{{- define "evictd.goMemLimit" -}}
{{- if .Values.goMemLimit -}}
{{ .Values.goMemLimit }}
{{- else -}}
{{- $lim := "" -}}
{{- with .Values.resources }}{{ with .limits }}{{ with .memory }}{{ $lim = toString . }}{{ end }}{{ end }}{{ end -}}
{{- if $lim -}}
{{- $m := regexFindAll "^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$" $lim -1 -}}
{{- if not $m -}}
{{- fail (printf "resources.limits.memory %q: GOMEMLIMIT cannot be derived from it; write it as a whole number with Ki, Mi, Gi, Ti, k, M, G or T, or set goMemLimit" $lim) -}}
{{- end -}}
{{- $num := regexReplaceAll "^([0-9]+).*$" $lim "${1}" | int64 -}}
{{- $unit := regexReplaceAll "^[0-9]+" $lim "" -}}
{{- $mult := get (dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000) $unit | int64 -}}
{{- $bytes := div (mul $num $mult 7) 8 -}}
{{- if eq (mod $bytes 1048576) 0 -}}
{{ div $bytes 1048576 }}MiB
{{- else -}}
{{ $bytes }}B
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The EvictdConfiguration file, or nothing when no value needs one: without a
file evictd runs on its defaults, as deploy/daemonset.yaml does.
*/}}
{{- define "evictd.config" -}}
{{- $t := .Values.thresholds -}}
{{- $c := dict -}}
{{- with $t.hard }}{{ $_ := set $c "evictionHard" . }}{{ end -}}
{{- with $t.soft }}{{ $_ := set $c "evictionSoft" . }}{{ end -}}
{{- with $t.softGracePeriod }}{{ $_ := set $c "evictionSoftGracePeriod" . }}{{ end -}}
{{- with $t.minimumReclaim }}{{ $_ := set $c "evictionMinimumReclaim" . }}{{ end -}}
{{- with $t.maxPodGracePeriod }}{{ $_ := set $c "evictionMaxPodGracePeriod" (int .) }}{{ end -}}
{{- with $t.pressureTransitionPeriod }}{{ $_ := set $c "evictionPressureTransitionPeriod" . }}{{ end -}}
{{- with $t.stallWindow }}{{ $_ := set $c "evictionStallWindow" . }}{{ end -}}
{{- with .Values.priorityGroups }}{{ $_ := set $c "priorityGroups" . }}{{ end -}}
{{- with .Values.excludedNamespaces }}{{ $_ := set $c "excludedNamespaces" . }}{{ end -}}
{{- with .Values.optOut }}{{ $_ := set $c "optOut" . }}{{ end -}}
{{- if .Values.includeDaemonSetPods }}{{ $_ := set $c "includeDaemonSetPods" true }}{{ end -}}
{{- /* memory.high's tunings only with its switch: evictd refuses them without it. A rate of 0 is a value (the signal left out), so each is tested for presence, not truth. */ -}}
{{- $m := .Values.memoryHigh -}}
{{- if $m.enabled -}}
{{- $_ := set $c "memoryHighEviction" true -}}
{{- range $value, $field := dict "eventRate" "memoryHighEventRate" "maxEventRate" "memoryHighMaxEventRate" "pressureSome" "memoryHighPressureSome" "window" "memoryHighWindow" "gracePeriod" "memoryHighGracePeriod" -}}
{{- if and (hasKey $m $value) (ne (toString (get $m $value)) "") }}{{ $_ := set $c $field (get $m $value) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if $c -}}
{{- $_ := set $c "apiVersion" "evictd.io/v1alpha1" -}}
{{- $_ := set $c "kind" "EvictdConfiguration" -}}
{{ toYaml $c }}
{{- end -}}
{{- end }}

{{/* The mount path of a host path under evictd's host root, /host. */}}
{{- define "evictd.underHost" -}}
{{- printf "/host/%s" (trimPrefix "/" .) | clean -}}
{{- end }}

{{/*
A scrape endpoint's interval, timeout and relabelings, for the
ServiceMonitor and the PodMonitor alike. The node label comes first and
always: the alerting rules and the dashboard read each agent by it.
*/}}
{{- define "evictd.scrape" -}}
interval: {{ .interval }}
{{- with .scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
relabelings:
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: node
  {{- with .relabelings }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
The cleanup Job's tolerations: the DaemonSet's (.Values.tolerations), and,
unless one of those tolerates every taint already, evictd's own taints and
those the DaemonSet controller gives every DaemonSet pod for a node under
pressure or cordoned (not those of a node that is not ready or
unreachable: a pod there would never start, and the Job would only wait
for its deadline).
*/}}
{{- define "evictd.cleanupTolerations" -}}
{{- $all := false -}}
{{- range .Values.tolerations -}}
{{- if and (eq (toString .operator) "Exists") (not .key) (not .effect) -}}
{{- $all = true -}}
{{- end -}}
{{- end -}}
{{- $extra := list -}}
{{- if not $all -}}
{{- range list "evictd.io/memory-pressure" "evictd.io/disk-pressure" "evictd.io/pid-pressure" -}}
{{- $extra = append $extra (dict "key" . "operator" "Exists") -}}
{{- end -}}
{{- range list "node.kubernetes.io/memory-pressure" "node.kubernetes.io/disk-pressure" "node.kubernetes.io/pid-pressure" "node.kubernetes.io/unschedulable" -}}
{{- $extra = append $extra (dict "key" . "operator" "Exists" "effect" "NoSchedule") -}}
{{- end -}}
{{- end -}}
{{- with concat (.Values.tolerations | default list) $extra -}}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end -}}
{{- end }}

{{/*
The cleanup Job's activeDeadlineSeconds, from cleanup.deadline (whole
seconds, rounded up), or cleanup.timeout plus a minute for the pod's
scheduling and image pull. It must exceed cleanup.timeout, evictd
cleanup's own bound, so that a cleanup that runs long ends on its own,
naming what is left, before the deadline cuts it off.
*/}}
{{- define "evictd.cleanupDeadline" -}}
{{- $c := .Values.cleanup -}}
{{- $t := float64 (include "evictd.nanos" $c.timeout) -}}
{{- $d := addf $t 60e9 -}}
{{- with $c.deadline -}}
{{- $d = float64 (include "evictd.nanos" .) -}}
{{- end -}}
{{- if le $d $t -}}
{{- fail (printf "cleanup.deadline %q is not above cleanup.timeout %q: the Job would be cut off before evictd cleanup ends on its own and says what is left; give the pod's start a minute on top (cleanup.deadline %ds), or leave cleanup.deadline empty for that" (toString $c.deadline) (toString $c.timeout) (add (ceil (divf $t 1e9) | int64) 60)) -}}
{{- end -}}
{{- printf "%d" (ceil (divf $d 1e9) | int64) -}}
{{- end }}
