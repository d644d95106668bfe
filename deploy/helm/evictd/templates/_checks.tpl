{{/*
Checks of values that values.schema.json cannot express: a duration's
range (JSON Schema compares numbers, and these are strings) and one value
against another. Each refuses at render, with one message naming the value,
what evictd or Kubernetes would otherwise refuse only once the pods (or the
DaemonSet) are created. test/deploy holds the bounds equal to evictd's own
(pkg/config), and to the x-evictd-range the schema states.
*/}}
{{- define "evictd.checkValues" -}}
{{- $t := .Values.thresholds -}}
{{- with $t.stallWindow -}}
{{- include "evictd.checkRange" (dict "name" "thresholds.stallWindow" "value" . "min" "1s" "max" "5m") -}}
{{- end -}}
{{- $m := .Values.memoryHigh -}}
{{- if $m.enabled -}}
{{- with $m.window -}}
{{- include "evictd.checkRange" (dict "name" "memoryHigh.window" "value" . "min" "1s" "max" "5m") -}}
{{- end -}}
{{- /* A key left out (or null) keeps evictd's non-zero default. */ -}}
{{- $zero := 0 -}}
{{- if and (hasKey $m "eventRate") (ne (toString $m.eventRate) "") (eq (float64 $m.eventRate) 0.0) }}{{ $zero = add1 $zero }}{{ end -}}
{{- if and (hasKey $m "maxEventRate") (ne (toString $m.maxEventRate) "") (eq (float64 $m.maxEventRate) 0.0) }}{{ $zero = add1 $zero }}{{ end -}}
{{- if and (hasKey $m "pressureSome") (ne (toString $m.pressureSome) "") (eq (float64 (trimSuffix "%" (toString $m.pressureSome))) 0.0) }}{{ $zero = add1 $zero }}{{ end -}}
{{- if eq $zero 3 -}}
{{- fail "memoryHigh.eventRate, memoryHigh.maxEventRate and memoryHigh.pressureSome are all 0, which leaves memoryHigh.enabled with no signal to act on (evictd refuses it at start); set one of them, or memoryHigh.enabled: false" -}}
{{- end -}}
{{- end -}}
{{- if eq (toString .Values.nodeLease.namespace) "kube-node-lease" -}}
{{- fail "nodeLease.namespace kube-node-lease: the kubelets' heartbeat Leases live there, each named after its node, and a node x's evictd-x is node evictd-x's; leave nodeLease.namespace empty (the release's namespace, where the Lease now lives; docs/run.md, One agent per node)" -}}
{{- end -}}
{{- if .Values.evictionRequest.enabled -}}
{{- include "evictd.checkRange" (dict "name" "evictionRequest.responderWait" "value" .Values.evictionRequest.responderWait "min" "1s" "max" "1h") -}}
{{- end -}}
{{- include "evictd.checkPlatform" . -}}
{{- include "evictd.checkMounts" . -}}
{{- include "evictd.checkKeepAway" . -}}
{{- include "evictd.checkSecure" . -}}
{{- end }}

{{/*
The secure port's values against each other: evictd refuses
--secure-metrics-only and the TLS files without --secure-bind-address, and
the API server two container ports of one number. metricsOnly takes
/metrics off the plain port, which the ServiceMonitor and PodMonitor scrape
(over plain HTTP, without a token the secure port would take).
*/}}
{{- define "evictd.checkSecure" -}}
{{- $s := .Values.secure -}}
{{- $m := .Values.metrics -}}
{{- if $s.enabled -}}
{{- if eq (int $s.port) (int $m.port) -}}
{{- fail (printf "secure.port %d is metrics.port too: the secure port (TLS, /explain) and the plain one (/healthz, /readyz, /metrics) need two ports; set secure.port to another, e.g. %d" (int $s.port) (add1 (int $m.port))) -}}
{{- end -}}
{{- if and $s.metricsOnly (or $m.serviceMonitor.enabled $m.podMonitor.enabled) -}}
{{- fail (printf "secure.metricsOnly takes /metrics off the plain port (metrics.port), which metrics.serviceMonitor and metrics.podMonitor scrape: leave secure.metricsOnly false, or scrape the secure port with a monitor of your own, as an identity bound to the ClusterRole %s-metrics-reader" (include "evictd.clusterName" .)) -}}
{{- end -}}
{{- else -}}
{{- if $s.metricsOnly -}}
{{- fail "secure.metricsOnly needs secure.enabled: with the secure port off, evictd would serve /metrics nowhere (it refuses --secure-metrics-only without --secure-bind-address at start)" -}}
{{- end -}}
{{- if $s.tlsSecret -}}
{{- fail (printf "secure.tlsSecret %q needs secure.enabled: the certificate is the secure port's (evictd refuses --tls-cert-file without --secure-bind-address at start)" $s.tlsSecret) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
nodeBrake.keepAway besteffort is a MutatingAdmissionPolicy, served as
admissionregistration.k8s.io/v1 and on by default from Kubernetes 1.36 (GA;
beta and off by default in 1.34 and 1.35), later than the chart's own
kubeVersion floor. Its toleration is of the memory brake's taint, which
evictd sets only with the brake on and a taint effect.
*/}}
{{- define "evictd.checkKeepAway" -}}
{{- $b := .Values.nodeBrake -}}
{{- if eq $b.keepAway "besteffort" -}}
{{- if semverCompare "<1.36.0-0" .Capabilities.KubeVersion.Version -}}
{{- fail (printf "nodeBrake.keepAway besteffort needs Kubernetes 1.36 or later (MutatingAdmissionPolicy, admissionregistration.k8s.io/v1); this cluster is %s: leave nodeBrake.keepAway all" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- if or (not $b.enabled) (eq $b.taintEffect "None") -}}
{{- fail "nodeBrake.keepAway besteffort tolerates the memory brake's taint, which evictd never sets with nodeBrake.enabled false or nodeBrake.taintEffect None: leave nodeBrake.keepAway all" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
Platforms evictd cannot run on, or only with their preset, refused at
render with what to do (docs/install.md, section 3, has the matrix).
GKE Autopilot shows no API of its own to the chart (auto.gke.io is served
on Standard clusters too), so only platform says it; OpenShift serves
security.openshift.io/v1, whose admission refuses evictd's pod under
every built-in SCC but privileged.
*/}}
{{- define "evictd.checkPlatform" -}}
{{- if eq .Values.platform "gke-autopilot" -}}
{{- fail "platform gke-autopilot: evictd does not run on GKE Autopilot, which refuses hostPath volumes outside /var/log and added capabilities; evictd reads the node's /proc, /sys/fs/cgroup, the kubelet's directory and the image store through hostPath volumes, with DAC_READ_SEARCH, IPC_LOCK and SYS_RESOURCE. Run it on GKE Standard node pools, with -f deploy/helm/evictd/presets/gke.yaml (docs/install.md, section 3)" -}}
{{- end -}}
{{- if and (.Capabilities.APIVersions.Has "security.openshift.io/v1") (ne .Values.platform "openshift") -}}
{{- fail (printf "this cluster serves security.openshift.io/v1 (OpenShift), whose admission refuses evictd's pods (root, hostPath volumes, three added capabilities) under every built-in SecurityContextConstraints but privileged; platform is %q: install with -f deploy/helm/evictd/presets/openshift.yaml, which renders an SCC that admits exactly evictd's pod and grants its use (docs/install.md, section 3)" .Values.platform) -}}
{{- end -}}
{{- end }}

{{/*
Two host paths mounted at one place: the API server refuses a pod whose
mount paths repeat ("must be unique"), so the DaemonSet would never get one.
evictd itself takes an equal --container-fs as no separate containerfs.
*/}}
{{- define "evictd.checkMounts" -}}
{{- $hp := .Values.hostPaths -}}
{{- $taken := dict "/host/sys/fs/cgroup" "the cgroup mount (/sys/fs/cgroup)" "/host/proc" "the /proc mount" "/host/var/lib/kubelet" "hostPaths.kubeletRoot" "/host/var/log/pods" "hostPaths.podLogs" "/etc/evictd" "the configuration" -}}
{{- $paths := list (list "hostPaths.imageStore" $hp.imageStore) (list "hostPaths.containerStore" $hp.containerStore) (list "hostPaths.runtimeState" $hp.runtimeState) -}}
{{- if .Values.actuator.enabled -}}
{{- $paths = append $paths (list "actuator.podCgroups" .Values.actuator.podCgroups) -}}
{{- end -}}
{{- $paths = append $paths (list "kubeletConfig.hostPath" .Values.kubeletConfig.hostPath) -}}
{{- range $i, $f := .Values.kubeletConfig.hostFiles -}}
{{- $paths = append $paths (list (printf "kubeletConfig.hostFiles[%d]" $i) $f) -}}
{{- end -}}
{{- range $p := $paths -}}
{{- $name := index $p 0 -}}
{{- $value := index $p 1 -}}
{{- if $value -}}
{{- $at := include "evictd.underHost" $value -}}
{{- with get $taken $at -}}
{{- $hint := "" -}}
{{- if and (eq $name "hostPaths.containerStore") (eq . "hostPaths.imageStore") -}}
{{- $hint = "; leave hostPaths.containerStore empty when the writable layers are under the image store" -}}
{{- end -}}
{{- fail (printf "%s %q is mounted at %s, where %s already is: Kubernetes refuses two mounts at one path, so no evictd pod would be created%s" $name $value $at . $hint) -}}
{{- end -}}
{{- $_ := set $taken $at $name -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* Refuses .value (a Go duration) outside .min...max, naming .name. */}}
{{- define "evictd.checkRange" -}}
{{- $v := float64 (include "evictd.nanos" .value) -}}
{{- if or (lt $v (float64 (include "evictd.nanos" .min))) (gt $v (float64 (include "evictd.nanos" .max))) -}}
{{- fail (printf "%s %q is outside %s..%s, evictd's bounds: every evictd pod would exit at start" .name (toString .value) .min .max) -}}
{{- end -}}
{{- end }}

{{/*
A Go duration in nanoseconds, as a float (exact to 2^53 ns, 104 days). The
schema has already held the spelling to number-unit pairs; Helm has no
duration parser, and sprig's addf/mulf are decimal, so 1000ms is exactly 1s.
*/}}
{{- define "evictd.nanos" -}}
{{- $unit := dict "ns" 1 "us" 1000 "ms" 1000000 "s" 1000000000 "m" 60000000000 "h" 3600000000000 -}}
{{- $ns := 0.0 -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h)" (toString .) -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $part -}}
{{- $ns = addf $ns (mulf $num (get $unit (trimPrefix $num $part))) -}}
{{- end -}}
{{- $ns -}}
{{- end }}
