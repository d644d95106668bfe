// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/thresholds"
)

// preset is one values file of deploy/helm/evictd/presets.
type preset struct {
	name   string // the file name without .yaml
	values string
}

func presets(t *testing.T) []preset {
	t.Helper()
	files, err := filepath.Glob(repoPath(t, "deploy", "helm", "evictd", "presets", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []preset
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, preset{strings.TrimSuffix(filepath.Base(f), ".yaml"), string(b)})
	}
	return out
}

// TestChartPresets: every distribution's preset renders and passes the
// schema, and its paths reach evictd as it reads them: the kubelet's root
// and the pod logs at the fixed places under /host, the image store at its
// own path under /host and named by --image-fs. The API server's
// validation of each is in TestChartServerSideDryRun.
func TestChartPresets(t *testing.T) {
	want := map[string][3]string{ // kubelet root, pod logs, image store
		"k3s":      {"/var/lib/kubelet", "/var/log/pods", "/var/lib/rancher/k3s/agent/containerd"},
		"rke2":     {"/var/lib/kubelet", "/var/log/pods", "/var/lib/rancher/rke2/agent/containerd"},
		"k0s":      {"/var/lib/k0s/kubelet", "/var/log/pods", "/var/lib/k0s/containerd"},
		"microk8s": {"/var/snap/microk8s/common/var/lib/kubelet", "/var/log/pods", "/var/snap/microk8s/common/var/lib/containerd"},
		"crio":     {"/var/lib/kubelet", "/var/log/pods", "/var/lib/containers/storage"},
		// The platforms' presets (TestPlatformPresets reads each node's
		// kubelet through what they mount).
		"gke":       {"/var/lib/kubelet", "/var/log/pods", "/var/lib/containerd"},
		"eks":       {"/var/lib/kubelet", "/var/log/pods", "/var/lib/containerd"},
		"aks":       {"/var/lib/kubelet", "/var/log/pods", "/var/lib/containerd"},
		"openshift": {"/var/lib/kubelet", "/var/log/pods", "/var/lib/containers/storage"},
		"kind":      {"/var/lib/kubelet", "/var/log/pods", "/var/lib/containerd"},
	}
	var seen []string
	for _, p := range presets(t) {
		seen = append(seen, p.name)
		w, ok := want[p.name]
		if !ok {
			t.Errorf("preset %s: not checked here; add its paths (and its sources to docs/install.md)", p.name)
			continue
		}
		objs, err := render(t, p.values)
		if err != nil {
			t.Errorf("preset %s: %v", p.name, err)
			continue
		}
		ds := find(t, objs, "DaemonSet", "evictd")
		pod := nested[map[string]any](t, ds, "spec", "template", "spec")
		c := pod["containers"].([]any)[0].(map[string]any)
		hostPath := map[string]string{}
		for _, v := range pod["volumes"].([]any) {
			if hp, ok := v.(map[string]any)["hostPath"].(map[string]any); ok {
				hostPath[v.(map[string]any)["name"].(string)] = hp["path"].(string)
			}
		}
		mountPath := map[string]string{}
		for _, m := range c["volumeMounts"].([]any) {
			mountPath[m.(map[string]any)["name"].(string)] = m.(map[string]any)["mountPath"].(string)
		}
		for i, vol := range []string{"kubelet", "pod-logs", "image-store"} {
			if hostPath[vol] != w[i] {
				t.Errorf("preset %s: volume %s is %q; want %q", p.name, vol, hostPath[vol], w[i])
			}
		}
		if mountPath["kubelet"] != "/host/var/lib/kubelet" || mountPath["pod-logs"] != "/host/var/log/pods" || mountPath["image-store"] != "/host"+w[2] {
			t.Errorf("preset %s: mounts %v", p.name, mountPath)
		}
		if !slices.Contains(c["args"].([]any), any("--image-fs="+w[2])) {
			t.Errorf("preset %s: args %v; want --image-fs=%s", p.name, c["args"], w[2])
		}
	}
	for name := range want {
		if !slices.Contains(seen, name) {
			t.Errorf("no preset %s.yaml", name)
		}
	}
}

// TestChartReleasesDoNotCollide: two releases, in one namespace or in two,
// render no object of the same kind and name (cluster-scoped ones
// included), and in one namespace neither's selectors pick the other's
// pods.
func TestChartReleasesDoNotCollide(t *testing.T) {
	all := "{thresholds: {hard: {memory.available: 1Gi}}, metrics: {serviceMonitor: {enabled: true}, podMonitor: {enabled: true}, prometheusRule: {enabled: true}}}"
	for _, pair := range [][2][2]string{
		{{"evictd", "team-a"}, {"evictd", "team-b"}},
		{{"evictd", "infra"}, {"canary", "infra"}},
	} {
		seen := map[string]string{}
		var podLabels []map[string]any
		var selectors []map[string]any
		for _, rel := range pair {
			objs, err := renderRelease(t, rel[0], rel[1], all)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if prev, dup := seen[key(o)]; dup {
					t.Errorf("releases %s and %s/%s both render %s", prev, rel[1], rel[0], key(o))
				}
				seen[key(o)] = rel[1] + "/" + rel[0]
				if o.GetKind() == "DaemonSet" {
					podLabels = append(podLabels, nested[map[string]any](t, o, "spec", "template", "metadata", "labels"))
					selectors = append(selectors, nested[map[string]any](t, o, "spec", "selector", "matchLabels"))
				}
			}
		}
		// A DaemonSet selects pods of its own namespace only.
		sameNamespace := pair[0][1] == pair[1][1]
		if sameNamespace && (selects(selectors[0], podLabels[1]) || selects(selectors[1], podLabels[0])) {
			t.Errorf("releases %v: a DaemonSet selects the other's pods (%v, %v)", pair, selectors, podLabels)
		}
	}
}

func selects(sel, labels map[string]any) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestChartGoMemLimit: GOMEMLIMIT is 7/8 of the memory limit unless
// goMemLimit says otherwise, absent without a limit, and a limit the
// chart cannot derive it from is an error naming it.
func TestChartGoMemLimit(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"", "84MiB"},
		{"resources: {limits: {memory: 1Gi}}", "896MiB"},
		{"resources: {limits: {memory: 100M}}", "87500000B"},
		{"{resources: {limits: {memory: 96Mi}}, goMemLimit: 90MiB}", "90MiB"},
		{"resources: {limits: {memory: null}}", ""},
	} {
		objs := mustRender(t, tc.values)
		c := nested[[]any](t, find(t, objs, "DaemonSet", "evictd"), "spec", "template", "spec", "containers")[0].(map[string]any)
		got := ""
		for _, e := range c["env"].([]any) {
			if e.(map[string]any)["name"] == "GOMEMLIMIT" {
				got = e.(map[string]any)["value"].(string)
			}
		}
		if got != tc.want {
			t.Errorf("values %q: GOMEMLIMIT %q; want %q", tc.values, got, tc.want)
		}
	}
	if _, err := render(t, "resources: {limits: {memory: 1.5Gi}}"); err == nil || !strings.Contains(err.Error(), "resources.limits.memory") {
		t.Errorf("a fractional limit: %v; want an error naming resources.limits.memory", err)
	}
}

// TestChartPDBPolicy: the "delete pods" rule comes with
// pdbPolicy: best-effort and only then; --pdb-policy in extraArgs, which
// would leave the rule out, is refused.
func TestChartPDBPolicy(t *testing.T) {
	for policy, want := range map[string]bool{"strict": false, "best-effort": true} {
		cr := find(t, mustRender(t, "pdbPolicy: "+policy), "ClusterRole", "evictd-evictd-system")
		if got := grants(t, cr, "", "pods", "delete"); got != want {
			t.Errorf("pdbPolicy %s: delete pods granted %v; want %v", policy, got, want)
		}
	}
	if _, err := render(t, "extraArgs: [--pdb-policy=best-effort]"); err == nil || !strings.Contains(err.Error(), "pdbPolicy") {
		t.Errorf("--pdb-policy in extraArgs: %v; want an error pointing at pdbPolicy", err)
	}
	if _, err := render(t, "pdbPolicy: lenient"); err == nil || !strings.Contains(err.Error(), "pdbPolicy") {
		t.Errorf("pdbPolicy lenient: %v; want a schema error", err)
	}
}

// TestChartEvictionRequest: the evictionrequests and "get pods" rules and
// the flag come with evictionRequest.enabled and only then; the flag in
// extraArgs, which would leave the rules out, is refused.
func TestChartEvictionRequest(t *testing.T) {
	for values, want := range map[string]bool{"": false, "evictionRequest: {enabled: true, responderWait: 30s}": true} {
		objs := mustRender(t, values)
		cr := find(t, objs, "ClusterRole", "evictd-evictd-system")
		for _, verb := range []string{"create", "get", "update", "list", "delete"} {
			if got := grants(t, cr, "lifecycle.k8s.io", "evictionrequests", verb); got != want {
				t.Errorf("%q: %s evictionrequests granted %v; want %v", values, verb, got, want)
			}
		}
		if got := grants(t, cr, "", "pods", "get"); got != want {
			t.Errorf("%q: get pods granted %v; want %v", values, got, want)
		}
	}
	if _, err := render(t, "extraArgs: [--eviction-request]"); err == nil || !strings.Contains(err.Error(), "evictionRequest") {
		t.Errorf("--eviction-request in extraArgs: %v; want an error pointing at evictionRequest", err)
	}
	if _, err := render(t, "evictionRequest: {responderWait: soon}"); err == nil || !strings.Contains(err.Error(), "responderWait") {
		t.Errorf("responderWait soon: %v; want a schema error", err)
	}
}

// TestChartImage: the tag defaults to the chart's appVersion, a digest wins
// over the tag.
func TestChartImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for values, want := range map[string]string{
		"": "evictd:" + repoVersion(t),
		"image: {repository: r.example/evictd, tag: v1}":                         "r.example/evictd:v1",
		"image: {repository: r.example/evictd, tag: v1, digest: " + digest + "}": "r.example/evictd@" + digest,
	} {
		c := nested[[]any](t, find(t, mustRender(t, values), "DaemonSet", "evictd"), "spec", "template", "spec", "containers")[0].(map[string]any)
		if c["image"] != want {
			t.Errorf("values %q: image %v; want %s", values, c["image"], want)
		}
	}
	if _, err := render(t, "image: {digest: latest}"); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("digest latest: %v; want a schema error", err)
	}
}

// TestChartSchemaKnowsEverySignal: the schema takes a threshold, a grace
// period and a minimum reclaim for every signal evictd knows
// (thresholds.Signals: swap and the memory stall signals included), and
// evictd's parser takes the file the chart makes of them.
func TestChartSchemaKnowsEverySignal(t *testing.T) {
	for _, sig := range thresholds.Signals() {
		if sig.MemoryHigh() {
			// Not a threshold: the memory.high family has its own
			// settings (docs/memhigh.md), and a threshold on its signal
			// must be refused where it is written, not when evictd starts.
			vals := map[string]any{"thresholds": map[string]any{"hard": map[string]any{string(sig): "1"}}}
			b, err := yaml.Marshal(vals)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := render(t, string(b)); err == nil {
				t.Errorf("%s: the schema accepts it as a threshold; evictd refuses it", sig)
			}
			continue
		}
		value := "10%"
		if sig.Stall() {
			value = "40%"
		}
		vals := map[string]any{"thresholds": map[string]any{
			"hard": map[string]any{string(sig): value}, "soft": map[string]any{string(sig): value},
			"softGracePeriod": map[string]any{string(sig): "1m"}, "stallWindow": "20s",
		}}
		if !sig.Stall() {
			vals["thresholds"].(map[string]any)["minimumReclaim"] = map[string]any{string(sig): "5%"}
		}
		b, err := yaml.Marshal(vals)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := render(t, string(b))
		if err != nil {
			t.Errorf("%s: the schema rejects it: %v", sig, err)
			continue
		}
		file := nested[string](t, find(t, objs, "ConfigMap", "evictd-config"), "data", "config.yaml")
		if _, err := config.Decode([]byte(file)); err != nil {
			t.Errorf("%s: the schema accepts it, evictd does not: %v\n%s", sig, err, file)
		}
	}
	if _, err := render(t, "thresholds: {stallWindow: soon}"); err == nil || !strings.Contains(err.Error(), "stallWindow") {
		t.Errorf("stallWindow soon: %v; want a schema error", err)
	}
}

// TestChartKubeVersion: one statement of the supported Kubernetes versions.
// docs/compat.md's "Supported Kubernetes versions" names the oldest release;
// the chart installs on it and refuses the one before, and README.md,
// docs/install.md and the chart's README say the same release.
func TestChartKubeVersion(t *testing.T) {
	compat, err := os.ReadFile(repoPath(t, "docs", "compat.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`evictd supports Kubernetes 1\.(\d+) or newer`).FindSubmatch(compat)
	if m == nil {
		t.Fatal(`docs/compat.md does not say "evictd supports Kubernetes 1.N or newer"`)
	}
	oldest, _ := strconv.Atoi(string(m[1]))
	stated := fmt.Sprintf("Kubernetes 1.%d or newer", oldest)
	for _, doc := range [][]string{{"README.md"}, {"docs", "install.md"}, {"deploy", "helm", "evictd", "README.md"}} {
		b, err := os.ReadFile(repoPath(t, doc...))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ")
		if !strings.Contains(text, stated) {
			t.Errorf("%s does not say %q, as docs/compat.md does", filepath.Join(doc...), stated)
		}
		for _, other := range regexp.MustCompile(`Kubernetes 1\.(\d+) or newer`).FindAllStringSubmatch(text, -1) {
			if other[1] != strconv.Itoa(oldest) {
				t.Errorf("%s says %q; docs/compat.md says %q", filepath.Join(doc...), other[0], stated)
			}
		}
	}
	chrt, err := loader.Load(repoPath(t, "deploy", "helm", "evictd"))
	if err != nil {
		t.Fatal(err)
	}
	for minor, ok := range map[int]bool{oldest - 1: false, oldest: true} {
		install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
		install.ClientOnly, install.DryRun, install.ReleaseName, install.Namespace = true, true, "evictd", "evictd-system"
		install.KubeVersion = &chartutil.KubeVersion{Version: fmt.Sprintf("v1.%d.0", minor), Major: "1", Minor: strconv.Itoa(minor)}
		_, err := install.Run(chrt, map[string]any{})
		if (err == nil) != ok {
			t.Errorf("Kubernetes 1.%d: %v; want installable %v (docs/compat.md: %s)", minor, err, ok, stated)
		}
	}
	// The manifest's own floor: recursiveReadOnly (GA in 1.33) is used,
	// so the supported release may not drop below 1.33.
	objs := mustRender(t, "")
	ds := find(t, objs, "DaemonSet", "evictd")
	var rro int
	for _, m := range nested[[]any](t, ds, "spec", "template", "spec", "containers")[0].(map[string]any)["volumeMounts"].([]any) {
		if m.(map[string]any)["recursiveReadOnly"] != nil {
			rro++
		}
	}
	if rro == 0 {
		t.Error("no mount uses recursiveReadOnly: the manifest alone would no longer need 1.33 (docs/compat.md says why)")
	}
}
