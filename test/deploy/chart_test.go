// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/exitgrace"
	"github.com/evictd/evictd/test/e2e/framework"
)

// TestChartDefaultsEqualManifest: with default values, installed as
// release "evictd" in namespace evictd-system, the chart renders the
// objects of deploy/daemonset.yaml but its Namespace (which a Helm user
// creates before installing: templates/namespace.yaml says why) field for
// field, once
// the two things only a Helm release has are taken out of the chart's side:
// Helm's standard labels (helm.sh/chart, app.kubernetes.io/instance,
// version and managed-by, in metadata, selectors and pod labels alike) and
// the release namespace in the cluster-scoped names (ClusterRole and
// ClusterRoleBinding evictd-evictd-system, plain evictd in the manifest;
// the secure port's evictd-evictd-system-auth-delegator, -explain-reader
// and -metrics-reader, evictd-auth-delegator and so on in the manifest;
// the admission policies and their bindings
// evictd-evictd-system-node-writes, -evictions and -leases,
// evictd-node-writes, evictd-evictions and evictd-leases in the manifest).
// Nothing else is removed from either side.
// equalsChart checks that the chart rendered with values gives the objects
// of want (what names them in the messages), field for field, once the
// release's own labels and names are taken out of the chart's side.
func equalsChart(t *testing.T, want []*unstructured.Unstructured, values, what string) {
	t.Helper()
	got := mustRender(t, values)
	for _, o := range got {
		withoutReleaseIdentity(t, o)
	}
	want = slices.DeleteFunc(slices.Clone(want), func(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" })
	wantBy, gotBy := byKey(t, want), byKey(t, got)
	if !slices.Equal(keys(wantBy), keys(gotBy)) {
		t.Fatalf("the chart renders %v; %s has %v", keys(gotBy), what, keys(wantBy))
	}
	for k, w := range wantBy {
		if d := cmp.Diff(w.Object, gotBy[k].Object); d != "" {
			t.Errorf("%s differs from %s (-manifest +chart):\n%s", k, what, d)
		}
	}
}

func TestChartDefaultsEqualManifest(t *testing.T) {
	want, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	equalsChart(t, want, "", "deploy/daemonset.yaml")
}

// TestGraceCoversExit: the agent pod's terminationGracePeriodSeconds, in
// the chart and in deploy/daemonset.yaml, is the grace the agent's exit
// work is sized for (exitgrace.TerminationGrace: the node brake's lift with
// its retries, then the lease's release); the default 30 s would cut the
// lift short.
func TestGraceCoversExit(t *testing.T) {
	objs, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := int64(exitgrace.TerminationGrace / time.Second)
	for _, src := range []struct {
		name string
		ds   *unstructured.Unstructured
	}{
		{"deploy/daemonset.yaml", find(t, objs, "DaemonSet", "evictd")},
		{"the chart", find(t, mustRender(t, ""), "DaemonSet", "evictd")},
	} {
		got, _, _ := unstructured.NestedFieldNoCopy(src.ds.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
		if n, ok := got.(float64); !ok || int64(n) != want {
			t.Errorf("%s: terminationGracePeriodSeconds %v; want %d, the grace the agent's exit work is sized for", src.name, got, want)
		}
	}
}

// TestChartOwnNodeEvictions: evictionPolicy.ownNodeOnly is off by
// default (the policy is opt-in, for what it costs); on, the chart renders
// deploy/daemonset.yaml's objects and deploy/own-node-evictions.yaml's
// policy and binding, each field for field but for what only a release
// has (as TestChartDefaultsEqualManifest: Helm's labels, the names with the
// release and its namespace). It does not depend on
// nodeBrake.admissionPolicy: with that off (and nodeLease.admissionPolicy,
// which governs the lease policy), it alone is rendered.
func TestChartOwnNodeEvictions(t *testing.T) {
	manifest, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ownNode, err := framework.ReadManifest(repoPath(t, "deploy", "own-node-evictions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const name = "evictd-evictd-system-own-node-evictions"
	isOwnNode := func(o *unstructured.Unstructured) bool { return o.GetName() == name }
	if slices.ContainsFunc(mustRender(t, ""), isOwnNode) {
		t.Errorf("a default render has %s: evictionPolicy.ownNodeOnly must be off by default", name)
	}
	equalsChart(t, append(slices.Clone(manifest), ownNode...), "evictionPolicy: {ownNodeOnly: true}",
		"deploy/daemonset.yaml with deploy/own-node-evictions.yaml")

	objs := mustRender(t, "evictionPolicy: {ownNodeOnly: true}\nnodeBrake: {admissionPolicy: false}\nnodeLease: {admissionPolicy: false}\nevictionRequest: {admissionPolicy: false}")
	var policies []string
	for _, o := range objs {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && !isPodDeletes(o) {
			policies = append(policies, key(o))
		}
	}
	if len(policies) != 2 || !slices.ContainsFunc(objs, isOwnNode) {
		t.Errorf("ownNodeOnly with nodeBrake.admissionPolicy false renders the policies %v; want %s and its binding alone (beside the pod deletes' policy, always rendered)", policies, name)
	}
}

// helmLabels are the standard labels a release adds beyond
// app.kubernetes.io/name, which the plain manifest cannot have.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// withoutReleaseIdentity removes from o what only a Helm release has (see
// TestChartDefaultsEqualManifest), failing when a label is not there to
// remove: the chart must set every one of them.
func withoutReleaseIdentity(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	strip := func(path ...string) {
		labels, found, err := unstructured.NestedStringMap(o.Object, path...)
		if err != nil || !found {
			t.Fatalf("%s: no %s", key(o), strings.Join(path, "."))
		}
		for _, l := range helmLabels {
			if l == "app.kubernetes.io/version" || l == "helm.sh/chart" || l == "app.kubernetes.io/managed-by" {
				if path[len(path)-1] == "matchLabels" {
					continue // a selector holds only what never changes
				}
			}
			if _, ok := labels[l]; !ok {
				t.Errorf("%s: %s has no %s (%v)", key(o), strings.Join(path, "."), l, labels)
			}
			delete(labels, l)
		}
		if err := unstructured.SetNestedStringMap(o.Object, labels, path...); err != nil {
			t.Fatal(err)
		}
	}
	strip("metadata", "labels")
	if o.GetKind() == "DaemonSet" {
		strip("spec", "selector", "matchLabels")
		strip("spec", "template", "metadata", "labels")
	}
	clusterName := defaultRelease + "-" + defaultNamespace
	switch o.GetKind() {
	case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		// The agent's own, named clusterName; the secure port's
		// (ClusterRoles only), clusterName-<suffix>, evictd-<suffix> in the
		// manifest. A binding's roleRef follows its role, unless it names
		// a built-in one (system:auth-delegator).
		manifestName := func(name string) (string, bool) {
			if name == clusterName {
				return "evictd", true
			}
			// evictd cleanup's Roles too (clusterName-cleanup): one of
			// them lives in the lease namespace every install shares.
			if suffix, ok := strings.CutPrefix(name, clusterName+"-"); ok && (clusterScoped[o.GetKind()] || suffix == "cleanup") {
				return "evictd-" + suffix, true
			}
			return name, false
		}
		name, ok := manifestName(o.GetName())
		if !ok {
			t.Errorf("%s: want the name %s, release name and namespace (with a suffix when cluster-scoped)", key(o), clusterName)
		}
		o.SetName(name)
		if o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding" {
			if ref, ok := manifestName(nested[string](t, o, "roleRef", "name")); ok {
				if err := unstructured.SetNestedField(o.Object, ref, "roleRef", "name"); err != nil {
					t.Fatal(err)
				}
			}
		}
	case "FlowSchema", "PriorityLevelConfiguration":
		// Named clusterName, evictd in the manifest; the FlowSchema's
		// priority level follows.
		if o.GetName() != clusterName {
			t.Errorf("%s: want the name %s, release name and namespace", key(o), clusterName)
		}
		o.SetName("evictd")
		if o.GetKind() == "FlowSchema" {
			if err := unstructured.SetNestedField(o.Object, "evictd", "spec", "priorityLevelConfiguration", "name"); err != nil {
				t.Fatal(err)
			}
		}
	case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
		suffix, ok := strings.CutPrefix(o.GetName(), clusterName+"-")
		if !ok {
			t.Errorf("%s: want the name %s-<policy>, release name and namespace", key(o), clusterName)
		}
		o.SetName("evictd-" + suffix)
		if o.GetKind() == "ValidatingAdmissionPolicyBinding" || o.GetKind() == "MutatingAdmissionPolicyBinding" {
			if err := unstructured.SetNestedField(o.Object, "evictd-"+suffix, "spec", "policyName"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// clusterScoped are the kinds the chart renders outside any namespace.
var clusterScoped = map[string]bool{
	"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"FlowSchema": true, "PriorityLevelConfiguration": true,
}

// fullValues sets every value the chart has to something other than its
// default.
const fullValues = `
image: {repository: registry.example/evictd, tag: v9.9.9, pullPolicy: Always}
nodeLease: {enabled: true, namespace: kube-public}
nodeBrake: {enabled: true, taintEffect: NoSchedule, admissionPolicy: true, keepAway: besteffort}
evictionPolicy: {ownNodeOnly: true}
imagePullSecrets: [{name: registry-example}]
commonLabels: {team: platform}
hostPaths:
  kubeletRoot: /data/kubelet
  podLogs: /data/pod-logs
  imageStore: /data/containers/images
  containerStore: /data/containers/layers
  runtimeState: /run/containers/state
thresholds:
  hard: {memory.available: "500Mi", nodefs.available: "10%", imagefs.inodesFree: "none", pid.available: "1000", memory.pressureSome: "40%"}
  soft: {memory.available: "1Gi", nodefs.available: "20%"}
  softGracePeriod: {memory.available: "1m30s", nodefs.available: "2m"}
  minimumReclaim: {memory.available: "200Mi", nodefs.available: "1Gi"}
  maxPodGracePeriod: 60
  pressureTransitionPeriod: 2m
  stallWindow: 30s
priorityGroups:
  - {name: batch, namespaces: [batch, ci], offset: -1000}
  - name: tenants
    namespaceSelector: {matchLabels: {evictd.io/tenant: "true"}}
    offset: 100
    fence: true
excludedNamespaces: [kube-system]
optOut: {namespaces: [platform], namespaceSelector: {matchLabels: {evictd.io/opt-out: allowed}}}
includeDaemonSetPods: true
dryRun: true
pdbPolicy: best-effort
log: {level: debug, format: console}
extraArgs: [--eviction-rate=2]
priorityClassName: evictd-critical
resources:
  requests: {cpu: 50m, memory: 48Mi}
  limits: {cpu: 200m, memory: 128Mi}
podSecurityContext: {seccompProfile: {type: Localhost, localhostProfile: evictd.json}}
securityContext: {runAsUser: 0, readOnlyRootFilesystem: true, capabilities: {drop: [ALL], add: [DAC_READ_SEARCH]}}
tolerations:
  - {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}
nodeSelector: {kubernetes.io/os: linux, node-role.example/worker: "true"}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: evictd.example/skip, operator: DoesNotExist}]}]
podAnnotations: {example.com/owner: platform}
podLabels: {cost-center: infra}
updateStrategy: {type: OnDelete}
probes:
  startup: null
  liveness: {httpGet: {path: /healthz, port: metrics}, periodSeconds: 20, timeoutSeconds: 10, failureThreshold: 3}
extraVolumes: [{name: ca, configMap: {name: ca-bundle}}]
extraVolumeMounts: [{name: ca, mountPath: /etc/ssl/extra, readOnly: true}]
serviceAccount: {create: true, name: evictd-agent, annotations: {example.com/role: agent}}
flowControl: {enabled: true, matchingPrecedence: 2000, nominalConcurrencyShares: 10, lendablePercent: 20, borrowingLimitPercent: 100,
  queuing: {queues: 32, handSize: 4, queueLengthLimit: 20}}
secure: {port: 9801, tlsSecret: agents-tls}
metrics:
  port: 9800
  serviceMonitor: {enabled: true, interval: 15s, scrapeTimeout: 10s, labels: {release: prometheus},
    relabelings: [{targetLabel: tier, replacement: node-agents}]}
  podMonitor: {enabled: true, interval: 20s, scrapeTimeout: 5s, labels: {release: prometheus}}
  prometheusRule: {enabled: true, labels: {release: prometheus}}
dashboard: {enabled: true, label: grafana_dashboards, labelValue: evictd, namespace: evictd-chart, labels: {release: grafana},
  annotations: {grafana_folder: evictd}}
`

// TestChartValues: each value lands where evictd and Kubernetes read it,
// rendered as release "agents" in namespace evictd-chart.
func TestChartValues(t *testing.T) {
	objs, err := renderRelease(t, "agents", "evictd-chart", fullValues)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch {
		case (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") && strings.HasSuffix(o.GetName(), "-cleanup") && o.GetNamespace() == "evictd-chart":
			// evictd cleanup's grant on the release's DaemonSet.
		case o.GetKind() == "Role" || o.GetKind() == "RoleBinding":
			// The node lease's grant, where every install's leases meet.
			if o.GetNamespace() != "kube-public" {
				t.Errorf("%s is not in nodeLease.namespace kube-public", key(o))
			}
		case clusterScoped[o.GetKind()]:
			if o.GetNamespace() != "" {
				t.Errorf("%s is cluster-scoped but has a namespace", key(o))
			}
		case o.GetNamespace() != "evictd-chart":
			t.Errorf("%s is not in the release namespace evictd-chart", key(o))
		}
		l := o.GetLabels()
		if l["team"] != "platform" || l["app.kubernetes.io/name"] != "evictd" || l["app.kubernetes.io/instance"] != "agents" ||
			l["app.kubernetes.io/version"] != "v9.9.9" || l["app.kubernetes.io/managed-by"] != "Helm" || l["helm.sh/chart"] != "evictd-"+repoVersion(t) {
			t.Errorf("%s has labels %v; want the standard ones and commonLabels", key(o), l)
		}
	}
	sa := find(t, objs, "ServiceAccount", "evictd-agent")
	if sa.GetAnnotations()["example.com/role"] != "agent" {
		t.Errorf("ServiceAccount annotations %v", sa.GetAnnotations())
	}
	cr := find(t, objs, "ClusterRole", "agents-evictd-evictd-chart")
	crb := find(t, objs, "ClusterRoleBinding", "agents-evictd-evictd-chart")
	assertYAMLEqual(t, "roleRef", crb.Object["roleRef"], `{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: agents-evictd-evictd-chart}`)
	assertYAMLEqual(t, "subjects", crb.Object["subjects"], `[{kind: ServiceAccount, name: evictd-agent, namespace: evictd-chart}]`)
	// The secure port's: this release's ServiceAccount delegates, its
	// readers' roles are named after the release and namespace too.
	delegator := find(t, objs, "ClusterRoleBinding", "agents-evictd-evictd-chart-auth-delegator")
	assertYAMLEqual(t, "auth-delegator subjects", delegator.Object["subjects"], `[{kind: ServiceAccount, name: evictd-agent, namespace: evictd-chart}]`)
	find(t, objs, "ClusterRole", "agents-evictd-evictd-chart-explain-reader")
	find(t, objs, "ClusterRole", "agents-evictd-evictd-chart-metrics-reader")
	// API Priority and Fairness: the level as tuned, the schema naming it
	// and this release's two ServiceAccounts.
	plc := find(t, objs, "PriorityLevelConfiguration", "agents-evictd-evictd-chart")
	assertYAMLEqual(t, "PriorityLevelConfiguration spec", plc.Object["spec"], `{type: Limited, limited: {nominalConcurrencyShares: 10,
		lendablePercent: 20, borrowingLimitPercent: 100, limitResponse: {type: Queue, queuing: {queues: 32, handSize: 4, queueLengthLimit: 20}}}}`)
	fs := find(t, objs, "FlowSchema", "agents-evictd-evictd-chart")
	assertYAMLEqual(t, "FlowSchema priority level", nested[map[string]any](t, fs, "spec", "priorityLevelConfiguration"), `{name: agents-evictd-evictd-chart}`)
	assertYAMLEqual(t, "FlowSchema matchingPrecedence", nested[map[string]any](t, fs, "spec")["matchingPrecedence"], `2000`)
	assertYAMLEqual(t, "FlowSchema subjects", nested[[]any](t, fs, "spec", "rules")[0].(map[string]any)["subjects"],
		`[{kind: ServiceAccount, serviceAccount: {name: evictd-agent, namespace: evictd-chart}},
		  {kind: ServiceAccount, serviceAccount: {name: agents-evictd-cleanup, namespace: evictd-chart}}]`)
	if !grants(t, cr, "", "pods", "delete") {
		t.Error("pdbPolicy best-effort: the ClusterRole does not grant delete pods")
	}
	if !grants(t, cr, "", "nodes", "patch") || !grants(t, cr, "", "nodes/status", "patch") {
		t.Error("nodeBrake.enabled: the ClusterRole does not grant patch on nodes and nodes/status")
	}
	// The policies are named after the release and its namespace, as the
	// ClusterRole, and hold this release's ServiceAccount to them.
	for _, policy := range []string{"node-writes", "evictions", "own-node-evictions", "leases", "pod-deletes"} {
		name := "agents-evictd-evictd-chart-" + policy
		vap := find(t, objs, "ValidatingAdmissionPolicy", name)
		assertYAMLEqual(t, name+" matchConditions", nested[[]any](t, vap, "spec", "matchConditions"),
			`[{name: evictd-service-account, expression: "request.userInfo.username == 'system:serviceaccount:evictd-chart:evictd-agent'"}]`)
		binding := find(t, objs, "ValidatingAdmissionPolicyBinding", name)
		want := `{policyName: ` + name + `, validationActions: [Deny]}`
		if policy == "own-node-evictions" {
			want = `{policyName: ` + name + `, validationActions: [Deny], paramRef: {selector: {}, parameterNotFoundAction: Deny}}`
		}
		assertYAMLEqual(t, name+" binding", binding.Object["spec"], want)
	}
	// The lease policy allows only the Lease in nodeLease.namespace, where
	// the Role grants it and evictd takes it.
	leases := find(t, objs, "ValidatingAdmissionPolicy", "agents-evictd-evictd-chart-leases")
	if vars := nested[[]any](t, leases, "spec", "variables"); !slices.ContainsFunc(vars, func(v any) bool {
		m, _ := v.(map[string]any)
		return m["name"] == "ownNamespace" && fmt.Sprint(m["expression"]) == "'kube-public'"
	}) {
		t.Errorf("%s: no variable ownNamespace naming kube-public: %v", key(leases), vars)
	}

	ds := find(t, objs, "DaemonSet", "agents-evictd")
	pod := nested[map[string]any](t, ds, "spec", "template", "spec")
	c := nested[[]any](t, ds, "spec", "template", "spec", "containers")[0].(map[string]any)
	if c["image"] != "registry.example/evictd:v9.9.9" || c["imagePullPolicy"] != "Always" {
		t.Errorf("image %v pull policy %v", c["image"], c["imagePullPolicy"])
	}
	wantArgs := []any{"run", "--host-root=/host", "--node-name=$(NODE_NAME)", "--metrics-bind-address=:9800",
		"--image-fs=/data/containers/images", "--container-fs=/data/containers/layers",
		"--secure-bind-address=:9801", "--tls-cert-file=/etc/evictd-tls/tls.crt", "--tls-private-key-file=/etc/evictd-tls/tls.key", "--install=$(POD_NAMESPACE)/agents-evictd",
		"--config=/etc/evictd/config.yaml", "--dry-run", "--pdb-policy=best-effort", "--log-level=debug", "--log-format=console",
		"--node-lease-namespace=kube-public", "--node-brake-taint-effect=NoSchedule", "--eviction-rate=2"}
	if !reflect.DeepEqual(c["args"], wantArgs) {
		t.Errorf("args %v; want %v", c["args"], wantArgs)
	}
	if port := c["ports"].([]any)[0].(map[string]any)["containerPort"]; port != int64(9800) && port != float64(9800) {
		t.Errorf("containerPort %v (%T); want 9800", port, port)
	}
	// 7/8 of the 128Mi limit.
	assertYAMLEqual(t, "env", c["env"], `[{name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}},
		{name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}, {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}},
		{name: GOMEMLIMIT, value: 112MiB}]`)
	assertYAMLEqual(t, "resources", c["resources"], `{requests: {cpu: 50m, memory: 48Mi}, limits: {cpu: 200m, memory: 128Mi}}`)
	// Helm merges maps with the defaults; a list (add) is replaced.
	assertYAMLEqual(t, "securityContext", c["securityContext"], `{runAsUser: 0, runAsGroup: 0, runAsNonRoot: false,
		allowPrivilegeEscalation: false, privileged: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL], add: [DAC_READ_SEARCH]}}`)
	assertYAMLEqual(t, "pod securityContext", pod["securityContext"], `{seccompProfile: {type: Localhost, localhostProfile: evictd.json}}`)
	assertYAMLEqual(t, "probes", []any{c["startupProbe"], c["livenessProbe"], c["readinessProbe"]},
		`[null, {httpGet: {path: /healthz, port: metrics}, periodSeconds: 20, timeoutSeconds: 10, failureThreshold: 3},
		  {httpGet: {path: /readyz, port: metrics}, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 2}]`)
	assertYAMLEqual(t, "tolerations", pod["tolerations"], `[{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]`)
	assertYAMLEqual(t, "nodeSelector", pod["nodeSelector"], `{kubernetes.io/os: linux, node-role.example/worker: "true"}`)
	assertYAMLEqual(t, "affinity", pod["affinity"], `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: evictd.example/skip, operator: DoesNotExist}]}]}}}`)
	assertYAMLEqual(t, "imagePullSecrets", pod["imagePullSecrets"], `[{name: registry-example}]`)
	if pod["priorityClassName"] != "evictd-critical" || pod["serviceAccountName"] != "evictd-agent" {
		t.Errorf("priorityClassName %v serviceAccountName %v", pod["priorityClassName"], pod["serviceAccountName"])
	}
	assertYAMLEqual(t, "updateStrategy", nested[map[string]any](t, ds, "spec", "updateStrategy"), `{type: OnDelete}`)
	tmpl := nested[map[string]any](t, ds, "spec", "template", "metadata")
	if tmpl["labels"].(map[string]any)["cost-center"] != "infra" || tmpl["annotations"].(map[string]any)["example.com/owner"] != "platform" {
		t.Errorf("pod template metadata %v; want podLabels and podAnnotations", tmpl)
	}
	assertYAMLEqual(t, "selector", nested[map[string]any](t, ds, "spec", "selector"),
		`{matchLabels: {app.kubernetes.io/name: evictd, app.kubernetes.io/instance: agents}}`)

	// Each host path is mounted where evictd reads it: the kubelet's root
	// and the pod logs where evictd looks under /host, the runtime's stores
	// at their own paths under /host, as --image-fs and --container-fs name
	// them; none of them is checked by the kubelet, /proc and cgroup are.
	mounts := map[string]string{}
	for _, m := range c["volumeMounts"].([]any) {
		mounts[m.(map[string]any)["name"].(string)] = m.(map[string]any)["mountPath"].(string)
	}
	vols := map[string]map[string]any{}
	for _, v := range pod["volumes"].([]any) {
		vols[v.(map[string]any)["name"].(string)] = v.(map[string]any)
	}
	for name, want := range map[string][3]string{
		"cgroup":          {"/sys/fs/cgroup", "/host/sys/fs/cgroup", "Directory"},
		"proc":            {"/proc", "/host/proc", "Directory"},
		"kubelet":         {"/data/kubelet", "/host/var/lib/kubelet", ""},
		"pod-logs":        {"/data/pod-logs", "/host/var/log/pods", ""},
		"image-store":     {"/data/containers/images", "/host/data/containers/images", ""},
		"container-store": {"/data/containers/layers", "/host/data/containers/layers", ""},
		"runtime-state":   {"/run/containers/state", "/host/run/containers/state", ""},
	} {
		hp, _ := vols[name]["hostPath"].(map[string]any)
		if hp["path"] != want[0] || mounts[name] != want[1] || hp["type"] != want[2] {
			t.Errorf("volume %s: hostPath %v mounted at %q; want %s at %s, type %q", name, hp, mounts[name], want[0], want[1], want[2])
		}
	}
	assertYAMLEqual(t, "extra volume", lastOf(t, pod["volumes"]), `{name: ca, configMap: {name: ca-bundle}}`)
	assertYAMLEqual(t, "extra mount", lastOf(t, c["volumeMounts"]), `{name: ca, mountPath: /etc/ssl/extra, readOnly: true}`)
	if vols["config"]["configMap"].(map[string]any)["name"] != "agents-evictd-config" || mounts["config"] != "/etc/evictd" {
		t.Errorf("config volume %v mounted at %q", vols["config"], mounts["config"])
	}
	if vols["tls"]["secret"].(map[string]any)["secretName"] != "agents-tls" || mounts["tls"] != "/etc/evictd-tls" {
		t.Errorf("tls volume %v mounted at %q; want secure.tlsSecret agents-tls at /etc/evictd-tls", vols["tls"], mounts["tls"])
	}

	// The file in the ConfigMap is what --config names, mounted there, and
	// evictd's own parser accepts it with every value as given.
	cm := find(t, objs, "ConfigMap", "agents-evictd-config")
	file := nested[string](t, cm, "data", "config.yaml")
	cfg, err := config.Decode([]byte(file))
	if err != nil {
		t.Fatalf("evictd's config parser rejects the chart's file: %v\n%s", err, file)
	}
	for sig, want := range map[string]string{"memory.available": "500Mi", "nodefs.available": "10%", "imagefs.inodesFree": "none", "pid.available": "1000"} {
		if cfg.EvictionHard[sig] != want {
			t.Errorf("evictionHard[%s] = %q; want %q", sig, cfg.EvictionHard[sig], want)
		}
	}
	if cfg.EvictionSoft["memory.available"] != "1Gi" || cfg.EvictionSoftGracePeriod["memory.available"] != "1m30s" ||
		cfg.EvictionMinimumReclaim["nodefs.available"] != "1Gi" {
		t.Errorf("soft %v grace %v reclaim %v", cfg.EvictionSoft, cfg.EvictionSoftGracePeriod, cfg.EvictionMinimumReclaim)
	}
	if cfg.EvictionMaxPodGracePeriod != 60 || cfg.EvictionPressureTransitionPeriod.Duration.String() != "2m0s" ||
		cfg.EvictionStallWindow.Duration.String() != "30s" || cfg.EvictionHard["memory.pressureSome"] != "40%" {
		t.Errorf("max pod grace %d, transition %v, stall window %v, hard %v", cfg.EvictionMaxPodGracePeriod,
			cfg.EvictionPressureTransitionPeriod, cfg.EvictionStallWindow, cfg.EvictionHard)
	}
	if len(cfg.PriorityGroups) != 2 || cfg.PriorityGroups[0].Name != "batch" || cfg.PriorityGroups[0].Offset != -1000 ||
		!cfg.PriorityGroups[1].Fence || cfg.PriorityGroups[1].NamespaceSelector.MatchLabels["evictd.io/tenant"] != "true" {
		t.Errorf("priority groups %+v", cfg.PriorityGroups)
	}
	if !slices.Equal(cfg.ExcludedNamespaces, []string{"kube-system"}) || !cfg.IncludeDaemonSetPods {
		t.Errorf("excluded %v, include DaemonSet pods %v", cfg.ExcludedNamespaces, cfg.IncludeDaemonSetPods)
	}
	if o := cfg.OptOut; o == nil || !slices.Equal(o.Namespaces, []string{"platform"}) || o.NamespaceSelector == nil ||
		o.NamespaceSelector.MatchLabels["evictd.io/opt-out"] != "allowed" {
		t.Errorf("optOut %+v, want namespaces [platform] and the selector evictd.io/opt-out=allowed", o)
	}
	if nested[string](t, ds, "spec", "template", "metadata", "annotations", "checksum/config") == "" {
		t.Error("no checksum/config annotation: a changed configuration would not roll the pods")
	}

	// The ServiceMonitor scrapes the pods' metrics port through the Service,
	// the PodMonitor the pods themselves; both select this release's pods
	// only and keep the node label first.
	svc := find(t, objs, "Service", "agents-evictd-metrics")
	sm := find(t, objs, "ServiceMonitor", "agents-evictd")
	pm := find(t, objs, "PodMonitor", "agents-evictd")
	podLabels := nested[map[string]any](t, ds, "spec", "template", "metadata", "labels")
	for _, m := range []*unstructured.Unstructured{sm, pm} {
		if m.GetAPIVersion() != "monitoring.coreos.com/v1" || m.GetLabels()["release"] != "prometheus" {
			t.Errorf("%s: %s labels %v", key(m), m.GetAPIVersion(), m.GetLabels())
		}
		if ns := nested[[]any](t, m, "spec", "namespaceSelector", "matchNames"); len(ns) != 1 || ns[0] != "evictd-chart" {
			t.Errorf("%s: namespaceSelector %v", key(m), ns)
		}
	}
	for _, sel := range []map[string]any{nested[map[string]any](t, svc, "spec", "selector"),
		nested[map[string]any](t, sm, "spec", "selector", "matchLabels"), nested[map[string]any](t, pm, "spec", "selector", "matchLabels")} {
		if sel["app.kubernetes.io/instance"] != "agents" {
			t.Errorf("selector %v does not pick this release's pods only", sel)
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("selector %v does not select the pods (labels %v)", sel, podLabels)
			}
		}
	}
	svcPort := nested[[]any](t, svc, "spec", "ports")[0].(map[string]any)
	if svcPort["targetPort"] != "metrics" {
		t.Errorf("Service port %v", svcPort)
	}
	nodeLabel := `{sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: node}`
	assertYAMLEqual(t, "ServiceMonitor endpoint", nested[[]any](t, sm, "spec", "endpoints")[0],
		`{port: `+svcPort["name"].(string)+`, path: /metrics, interval: 15s, scrapeTimeout: 10s, relabelings: [`+nodeLabel+`, {targetLabel: tier, replacement: node-agents}]}`)
	assertYAMLEqual(t, "PodMonitor endpoint", nested[[]any](t, pm, "spec", "podMetricsEndpoints")[0],
		`{port: metrics, path: /metrics, interval: 20s, scrapeTimeout: 5s, relabelings: [`+nodeLabel+`]}`)

	// The PrometheusRule carries the rules file as it is, which Prometheus
	// parses.
	pr := find(t, objs, "PrometheusRule", "agents-evictd")
	spec, err := yaml.Marshal(nested[map[string]any](t, pr, "spec"))
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := rulefmt.Parse(spec, false, model.UTF8Validation); len(errs) > 0 {
		t.Errorf("the PrometheusRule's spec does not parse as rules: %v", errs)
	}
	wantRules := map[string]any{}
	src, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Release agents: its DaemonSet is agents-evictd, which the rules select
	// in place of the file's default (the job stays evictd, the chart's name).
	src = bytes.ReplaceAll(src, []byte(`daemonset="evictd"`), []byte(`daemonset="agents-evictd"`))
	// Its metrics port, 9800, takes the place of the default in the
	// annotations' kubectl commands.
	src = bytes.ReplaceAll(src, []byte(`:9731/proxy/`), []byte(`:9800/proxy/`))
	if err := yaml.Unmarshal(src, &wantRules); err != nil {
		t.Fatal(err)
	}
	// And the recording rules, after the alerts.
	wantRules["groups"] = append(wantRules["groups"].([]any), ruleFile(t, "recording.yaml")["groups"].([]any)...)
	if d := cmp.Diff(wantRules, nested[map[string]any](t, pr, "spec")); d != "" {
		t.Errorf("the PrometheusRule differs from deploy/monitoring/alerts.yaml and recording.yaml (-files +chart):\n%s", d)
	}
}

// TestChartOptionalObjects: the ConfigMap, ServiceMonitor, Service,
// PodMonitor and PrometheusRule appear only when asked for, no Namespace ever, and
// the ServiceAccount, RBAC objects and admission policies can be left to
// the user; the node brake's Node patches come only with the brake.
func TestChartOptionalObjects(t *testing.T) {
	def := mustRender(t, "")
	for _, kind := range []string{"ConfigMap", "ServiceMonitor", "Service", "PrometheusRule", "PodMonitor", "Namespace"} {
		if has(def, kind) {
			t.Errorf("a default render has a %s", kind)
		}
	}
	for _, tc := range []struct {
		values string
		kinds  []string
	}{
		{"dryRun: true", nil},
		{"thresholds: {hard: {memory.available: 1Gi}}", []string{"ConfigMap"}},
		{"priorityGroups: [{name: batch, namespaces: [batch]}]", []string{"ConfigMap"}},
		{"metrics: {serviceMonitor: {enabled: true}}", []string{"Service", "ServiceMonitor"}},
		{"metrics: {prometheusRule: {enabled: true}}", []string{"PrometheusRule"}},
		{"metrics: {podMonitor: {enabled: true}}", []string{"PodMonitor"}},
		{"serviceAccount: {create: false, name: existing}", nil},
	} {
		objs := mustRender(t, tc.values)
		for _, kind := range []string{"ConfigMap", "ServiceMonitor", "Service", "PrometheusRule", "PodMonitor"} {
			if want := slices.Contains(tc.kinds, kind); has(objs, kind) != want {
				t.Errorf("values %q: %s rendered %v; want %v", tc.values, kind, has(objs, kind), want)
			}
		}
	}
	// namespace.create, removed, is refused with what to do instead; false
	// asks for what the chart does anyway.
	if _, err := render(t, "namespace: {create: true}"); err == nil ||
		!strings.Contains(err.Error(), "namespace.create=true is no longer supported") ||
		!strings.Contains(err.Error(), "kubectl create namespace evictd-system && kubectl label namespace evictd-system pod-security.kubernetes.io/enforce=privileged") {
		t.Errorf("namespace.create: true: %v; want the error that says to create and label the namespace first", err)
	}
	if objs := mustRender(t, "namespace: {create: false}"); has(objs, "Namespace") {
		t.Error("namespace.create: false renders a Namespace")
	}
	// serviceAccount.create false: no ServiceAccount, the pods run as the
	// named one, and the binding binds it.
	objs := mustRender(t, "serviceAccount: {create: false, name: existing}")
	if slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "ServiceAccount" && o.GetName() != "evictd-cleanup"
	}) {
		t.Error("serviceAccount.create: false still renders the agents' ServiceAccount")
	}
	if sa := nested[string](t, find(t, objs, "DaemonSet", "evictd"), "spec", "template", "spec", "serviceAccountName"); sa != "existing" {
		t.Errorf("serviceAccountName %q; want existing", sa)
	}
	// As a subchart it gets its parent's global values, which the closed
	// schema must let through.
	mustRender(t, "global: {imageRegistry: registry.example}")
	if objs := mustRender(t, "rbac: {create: false}"); has(objs, "ClusterRole") || has(objs, "ClusterRoleBinding") {
		t.Error("rbac.create: false still renders RBAC objects")
	}
	// The node brake's Node patches come only with the brake
	// (TestChartValuesGrants). Its admission policies are on unless turned
	// off, brake or not.
	objs = mustRender(t, "nodeBrake: {enabled: false}")
	if args := nested[[]any](t, find(t, objs, "DaemonSet", "evictd"), "spec", "template", "spec", "containers")[0].(map[string]any)["args"].([]any); !slices.Contains(args, any("--node-brake=false")) {
		t.Errorf("nodeBrake.enabled: false: args %v; want --node-brake=false", args)
	}
	if !has(objs, "ValidatingAdmissionPolicy") {
		t.Error("nodeBrake.enabled: false drops the admission policies, which nodeBrake.admissionPolicy governs")
	}
	// nodeBrake.admissionPolicy governs the Node writes' and evictions'
	// policies; nodeLease.admissionPolicy the lease policy, which comes
	// with the lease (its Role) only, and the cleanup's deletes' policy;
	// evictionRequest.admissionPolicy the agents' EvictionRequest policy,
	// installed with the mode off too (as the manifest's).
	// The policies a render has besides the pod deletes' (whose policy and
	// binding every render has: TestChartPodDeletesPolicy).
	policies := func(values string) []string {
		var names []string
		objs := mustRender(t, values)
		if n := len(slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool { return !isPodDeletes(o) })); n != 2 {
			t.Errorf("values %q render %d objects of the pod deletes' policy; want the policy and its binding", values, n)
		}
		for _, o := range objs {
			if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && !isPodDeletes(o) {
				names = append(names, key(o))
			}
		}
		slices.Sort(names)
		return names
	}
	const leasePolicy, leaseBinding = "ValidatingAdmissionPolicy /evictd-evictd-system-leases", "ValidatingAdmissionPolicyBinding /evictd-evictd-system-leases"
	const deletesPolicy, deletesBinding = "ValidatingAdmissionPolicy /evictd-evictd-system-cleanup-deletes", "ValidatingAdmissionPolicyBinding /evictd-evictd-system-cleanup-deletes"
	const requestsPolicy, requestsBinding = "ValidatingAdmissionPolicy /evictd-evictd-system-eviction-requests", "ValidatingAdmissionPolicyBinding /evictd-evictd-system-eviction-requests"
	const noRequests = "\nevictionRequest: {admissionPolicy: false}"
	for _, tc := range []struct {
		values string
		want   []string
	}{
		{"nodeBrake: {admissionPolicy: false}", []string{deletesPolicy, requestsPolicy, leasePolicy, deletesBinding, requestsBinding, leaseBinding}},
		{"nodeBrake: {admissionPolicy: false}" + noRequests, []string{deletesPolicy, leasePolicy, deletesBinding, leaseBinding}},
		{"nodeBrake: {admissionPolicy: false}\nnodeLease: {admissionPolicy: false}" + noRequests, nil},
		{"nodeBrake: {admissionPolicy: false}\nnodeLease: {enabled: false}" + noRequests, []string{deletesPolicy, deletesBinding}},
	} {
		if got := policies(tc.values); !slices.Equal(got, tc.want) {
			t.Errorf("values %q render the policies %v; want %v", tc.values, got, tc.want)
		}
	}
	var noLease []string
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		for _, name := range []string{"cleanup-node-writes", "eviction-requests", "evictions", "node-writes"} {
			noLease = append(noLease, kind+" /evictd-evictd-system-"+name)
		}
	}
	if got := policies("nodeLease: {admissionPolicy: false}"); !slices.Equal(got, noLease) {
		t.Errorf("nodeLease.admissionPolicy: false renders the policies %v; want %v: node-writes', EvictionRequests', evictions' and the cleanup's node writes' with their bindings, no lease or cleanup deletes' policy", got, noLease)
	}
	// The kubelets' heartbeats live in kube-node-lease, each named after its
	// node: a node x's evictd-x there is node evictd-x's.
	if _, err := render(t, "nodeLease: {namespace: kube-node-lease}"); err == nil || !strings.Contains(err.Error(), "the kubelets' heartbeat Leases live there") {
		t.Errorf("nodeLease.namespace kube-node-lease: %v; want the chart to refuse it", err)
	}
	if _, err := render(t, "extraArgs: [--node-brake-taint-effect=None]"); err == nil || !strings.Contains(err.Error(), "set nodeBrake.enabled and nodeBrake.taintEffect") {
		t.Errorf("extraArgs --node-brake-taint-effect: %v; want the error naming nodeBrake", err)
	}
	// The checksum follows the configuration.
	a := find(t, mustRender(t, "thresholds: {hard: {memory.available: 1Gi}}"), "DaemonSet", "evictd")
	b := find(t, mustRender(t, "thresholds: {hard: {memory.available: 2Gi}}"), "DaemonSet", "evictd")
	ca := nested[string](t, a, "spec", "template", "metadata", "annotations", "checksum/config")
	cb := nested[string](t, b, "spec", "template", "metadata", "annotations", "checksum/config")
	if ca == cb {
		t.Errorf("checksum/config %s is the same for two configurations", ca)
	}
}

// TestChartRejectsBadValues: values.schema.json stops a value evictd would
// refuse at start (or Kubernetes at apply) before anything is installed,
// with an error naming it.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		values string
		naming string // what the error must mention
	}{
		{`thresholds: {hard: {memory.available: 500MB}}`, "memory.available"},
		{`thresholds: {hard: {memory.available: "-1Gi"}}`, "memory.available"},
		{`thresholds: {soft: {memory.avialable: 1Gi}}`, "memory.avialable"},
		{`thresholds: {softGracePeriod: {memory.available: "90"}}`, "softGracePeriod"},
		{`thresholds: {minimumReclaim: {nodefs.available: lots}}`, "minimumReclaim"},
		{`thresholds: {minimumReclaim: {nodefs.available: none}}`, "minimumReclaim"},
		{`thresholds: {maxPodGracePeriod: -1}`, "maxPodGracePeriod"},
		{`thresholds: {pressureTransitionPeriod: soon}`, "pressureTransitionPeriod"},
		{`thresholds: {hard: {pid.available: 1000}}`, "pid.available"}, // a number, not a string
		{`image: {pullPolicy: Sometimes}`, "pullPolicy"},
		{`metrics: {port: 70000}`, "port"},
		{`extraArgs: [dry-run]`, "extraArgs"},
		{`priorityGroups: [{namespaces: [batch]}]`, "name"},
		{`priorityGroups: [{name: batch, ofset: 10}]`, "ofset"},
		{`optOut: {namespace: [platform]}`, "namespace"},
		{`nameOverride: Evictd_System`, "nameOverride"},
		{`hostPaths: {imageStore: var/lib/containerd}`, "imageStore"},
		{`hostPaths: {kubeletRoot: /var/lib/kubelet/}`, "kubeletRoot"},
		{`log: {level: verbose}`, "level"},
		{`metrics: {podMonitor: {scrapeTimeout: 5}}`, "scrapeTimeout"},
		{`namespce: {create: true}`, "namespce"},
		{`dryRun: "yes"`, "dryRun"},
		{`nodeBrake: {taintEffect: NoExecute}`, "taintEffect"},
		{`nodeBrake: {admissionPolicy: "false"}`, "admissionPolicy"},
		{`nodeLease: {admissionPolicy: "false"}`, "admissionPolicy"},
		{`nodeBrake: {enable: false}`, "enable"},
		{`evictionPolicy: {ownNodeOnly: "true"}`, "ownNodeOnly"},
		{`evictionPolicy: {ownNode: true}`, "ownNode"},
		{`flowControl: {matchingPrecedence: 9000}`, "matchingPrecedence"},
		{`flowControl: {matchingPrecedence: 900}`, "matchingPrecedence"},
		{`flowControl: {nominalConcurrencyShares: 0}`, "nominalConcurrencyShares"},
		{`flowControl: {lendablePercent: 101}`, "lendablePercent"},
		{`flowControl: {borrowingLimitPercent: -1}`, "borrowingLimitPercent"},
		{`flowControl: {queuing: {queues: 0}}`, "queues"},
		{`flowControl: {queuing: {queues: 4, handSize: 6}}`, "handSize"},
		{`flowControl: {enabled: "false"}`, "enabled"},
	} {
		_, err := render(t, tc.values)
		if err == nil {
			t.Errorf("values %q rendered; want a schema error", tc.values)
			continue
		}
		if !strings.Contains(err.Error(), tc.naming) {
			t.Errorf("values %q: error does not name %q:\n%v", tc.values, tc.naming, err)
		}
	}
}

// TestChartSchemaAgreesWithEvictd: every threshold spelling the schema lets
// through, evictd's config parser accepts too, so a chart that installs is
// one whose pods start.
func TestChartSchemaAgreesWithEvictd(t *testing.T) {
	for _, tc := range []struct{ field, value string }{
		{"hard", "500Mi"}, {"hard", "1Gi"}, {"hard", "2G"}, {"hard", "1000"}, {"hard", "10%"}, {"hard", "12.5%"},
		{"hard", "none"}, {"hard", "1.5Gi"}, {"soft", "3Gi"},
		{"minimumReclaim", "500Mi"}, {"minimumReclaim", "5%"}, {"minimumReclaim", "0"},
	} {
		v := tc.value
		vals := `thresholds: {` + tc.field + `: {nodefs.available: "` + v + `"}}`
		if tc.field == "soft" {
			vals = `thresholds: {soft: {nodefs.available: "` + v + `"}, softGracePeriod: {nodefs.available: 1m}}`
		}
		objs, err := render(t, vals)
		if err != nil {
			t.Errorf("%s %q: the schema rejects it: %v", tc.field, v, err)
			continue
		}
		file := nested[string](t, find(t, objs, "ConfigMap", "evictd-config"), "data", "config.yaml")
		if _, err := config.Decode([]byte(file)); err != nil {
			t.Errorf("%s %q: the schema accepts it, evictd does not: %v", tc.field, v, err)
		}
	}
}

// TestChartAlertsCopy: the chart's files/alerts.yaml and
// files/recording.yaml are deploy/monitoring's byte for byte (Helm reads no
// file outside the chart, so it holds copies).
func TestChartAlertsCopy(t *testing.T) {
	for _, f := range []string{"alerts.yaml", "recording.yaml"} {
		want, err := os.ReadFile(repoPath(t, "deploy", "monitoring", f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "files", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/helm/evictd/files/%s differs from deploy/monitoring/%s; copy it: "+
				"cp deploy/monitoring/%s deploy/helm/evictd/files/%s", f, f, f, f)
		}
	}
}

// nested returns the field at path, of type T, or fails.
func nested[T any](t *testing.T, o *unstructured.Unstructured, path ...string) T {
	t.Helper()
	var cur any = o.Object
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is not a map", key(o), strings.Join(path, "."))
		}
		cur = m[p]
	}
	v, ok := cur.(T)
	if !ok {
		var zero T
		t.Fatalf("%s: %s is %T (%v); want %T", key(o), strings.Join(path, "."), cur, cur, zero)
	}
	return v
}

func lastOf(t *testing.T, list any) any {
	t.Helper()
	l, ok := list.([]any)
	if !ok || len(l) == 0 {
		t.Fatalf("%v is not a non-empty list", list)
	}
	return l[len(l)-1]
}

// assertYAMLEqual compares a rendered field with YAML written in the test,
// parsed by the same library.
func assertYAMLEqual(t *testing.T, what string, got any, wantYAML string) {
	t.Helper()
	var want any
	if err := yaml.Unmarshal([]byte(wantYAML), &want); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// grants reports whether the ClusterRole r has a rule granting verb on
// resource in group.
func grants(t *testing.T, r *unstructured.Unstructured, group, resource, verb string) bool {
	t.Helper()
	for _, rule := range nested[[]any](t, r, "rules") {
		m := rule.(map[string]any)
		if slices.Contains(m["apiGroups"].([]any), any(group)) && slices.Contains(m["resources"].([]any), any(resource)) &&
			slices.Contains(m["verbs"].([]any), any(verb)) {
			return true
		}
	}
	return false
}
