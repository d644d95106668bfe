{{/*
Labels of every object. Only app.kubernetes.io/name unless commonLabels adds
more: Helm's own labels are left out so that a default render is exactly
deploy/daemonset.yaml.
*/}}
{{- define "evictd.labels" -}}
app.kubernetes.io/name: evictd
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "evictd.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
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
{{- with .Values.priorityGroups }}{{ $_ := set $c "priorityGroups" . }}{{ end -}}
{{- with .Values.excludedNamespaces }}{{ $_ := set $c "excludedNamespaces" . }}{{ end -}}
{{- if .Values.includeDaemonSetPods }}{{ $_ := set $c "includeDaemonSetPods" true }}{{ end -}}
{{- if $c -}}
{{- $_ := set $c "apiVersion" "evictd.io/v1alpha1" -}}
{{- $_ := set $c "kind" "EvictdConfiguration" -}}
{{ toYaml $c }}
{{- end -}}
{{- end }}
