// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/evictd/evictd/test/e2e/framework"
)

// The secure port's cluster-scoped objects, as a default release names them
// (deploy/daemonset.yaml: evictd-auth-delegator, evictd-explain-reader,
// evictd-metrics-reader).
const (
	authDelegator = defaultRelease + "-" + defaultNamespace + "-auth-delegator"
	explainReader = defaultRelease + "-" + defaultNamespace + "-explain-reader"
	metricsReader = defaultRelease + "-" + defaultNamespace + "-metrics-reader"
)

// securePort returns the container port named secure, or nil.
func securePort(c map[string]any) map[string]any {
	for _, p := range c["ports"].([]any) {
		if p.(map[string]any)["name"] == "secure" {
			return p.(map[string]any)
		}
	}
	return nil
}

// secureArgs are the container's arguments of the secure port and its
// certificate.
func secureArgs(c map[string]any) []string {
	var out []string
	for _, a := range c["args"].([]any) {
		if s := a.(string); strings.HasPrefix(s, "--secure-") || strings.HasPrefix(s, "--tls-") {
			out = append(out, s)
		}
	}
	return out
}

// isSecureRBAC reports whether o is one of the secure port's RBAC objects.
func isSecureRBAC(o *unstructured.Unstructured) bool {
	switch o.GetName() {
	case authDelegator, explainReader, metricsReader:
		return true
	}
	return false
}

// TestChartSecure: secure.enabled (on by default) serves /explain and
// /metrics on the port named secure (where `evictd explain` connects), binds
// the ServiceAccount to system:auth-delegator (for the TokenReviews and
// SubjectAccessReviews the port asks), and installs the ClusterRoles
// -explain-reader (get on nodes/explain, nodes/shadow and nodes/trace of
// evictd.io) and -metrics-reader (get on nodes/metrics of evictd.io: grants
// no other server honours), labelled as every object and bound
// to no one; deploy/daemonset.yaml has
// the same under its plain names (TestChartDefaultsEqualManifest holds the
// rest equal). Off, none of it is rendered, and nothing else changes.
func TestChartSecure(t *testing.T) {
	objs := mustRender(t, "")
	c, vols := agentPod(t, "")
	if got := secureArgs(c); !slices.Equal(got, []string{"--secure-bind-address=:9732"}) {
		t.Errorf("default values: secure args %v; want --secure-bind-address=:9732 alone (a self-signed certificate, /metrics on both ports)", got)
	}
	assertYAMLEqual(t, "the secure port", securePort(c), `{name: secure, containerPort: 9732, protocol: TCP}`)
	if _, ok := vols["tls"]; ok || mountNamed(c, "tls") != nil {
		t.Error("default values mount a TLS Secret; want none without secure.tlsSecret")
	}
	// The probes stay on the plain port.
	for _, probe := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
		if port := c[probe].(map[string]any)["httpGet"].(map[string]any)["port"]; port != "metrics" {
			t.Errorf("%s on port %v; want metrics, the plain port", probe, port)
		}
	}

	crb := find(t, objs, "ClusterRoleBinding", authDelegator)
	assertYAMLEqual(t, authDelegator+" roleRef", crb.Object["roleRef"], `{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}`)
	assertYAMLEqual(t, authDelegator+" subjects", crb.Object["subjects"], `[{kind: ServiceAccount, name: evictd, namespace: evictd-system}]`)
	readerRules := map[string]string{
		explainReader: `[{apiGroups: [evictd.io], resources: [nodes/explain, nodes/shadow, nodes/trace], verbs: [get]}]`,
		metricsReader: `[{apiGroups: [evictd.io], resources: [nodes/metrics], verbs: [get]}]`,
	}
	for name, rules := range readerRules {
		cr := find(t, objs, "ClusterRole", name)
		assertYAMLEqual(t, name+" rules", cr.Object["rules"], rules)
	}
	for _, o := range objs {
		if isSecureRBAC(o) {
			l := o.GetLabels()
			if l["app.kubernetes.io/name"] != "evictd" || l["app.kubernetes.io/instance"] != defaultRelease || l["app.kubernetes.io/managed-by"] != "Helm" || l["helm.sh/chart"] == "" {
				t.Errorf("%s has labels %v; want the chart's standard ones", key(o), l)
			}
		}
		// Bound to no one: no binding of the chart names the readers.
		if o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding" {
			if ref := nested[string](t, o, "roleRef", "name"); ref == explainReader || ref == metricsReader {
				t.Errorf("%s binds %s; the readers are for operators to bind", key(o), ref)
			}
		}
	}

	// The plain manifest: the same objects under the names the docs give.
	manifest, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mcrb := find(t, manifest, "ClusterRoleBinding", "evictd-auth-delegator")
	if ref := nested[string](t, mcrb, "roleRef", "name"); ref != "system:auth-delegator" {
		t.Errorf("deploy/daemonset.yaml: evictd-auth-delegator binds %s; want system:auth-delegator", ref)
	}
	for name, rules := range readerRules {
		manifestName := "evictd-" + strings.TrimPrefix(name, defaultRelease+"-"+defaultNamespace+"-")
		cr := find(t, manifest, "ClusterRole", manifestName)
		assertYAMLEqual(t, "deploy/daemonset.yaml: "+manifestName+" rules", cr.Object["rules"], rules)
	}

	// Off: nothing of the secure port, everything else as it was.
	off := mustRender(t, "secure: {enabled: false}")
	if secure := slices.DeleteFunc(slices.Clone(off), func(o *unstructured.Unstructured) bool { return !isSecureRBAC(o) }); len(secure) != 0 {
		t.Errorf("secure.enabled false renders %v", keys(byKey(t, secure)))
	}
	offC, _ := agentPod(t, "secure: {enabled: false}")
	if got := secureArgs(offC); len(got) != 0 {
		t.Errorf("secure.enabled false passes %v", got)
	}
	if p := securePort(offC); p != nil {
		t.Errorf("secure.enabled false has the container port %v", p)
	}
	if len(off) != len(objs)-3 {
		t.Errorf("secure.enabled false renders %d objects; want the default's %d less the three of the secure port", len(off), len(objs))
	}
	if notes := renderNotes(t, "secure: {enabled: false}"); strings.Contains(notes, "explain") {
		t.Errorf("secure.enabled false: the NOTES still tell how to read /explain:\n%s", notes)
	}
	if notes := renderNotes(t, ""); !strings.Contains(notes, "--clusterrole="+explainReader) {
		t.Errorf("the NOTES do not show how to bind %s:\n%s", explainReader, notes)
	}

	// rbac.create false: the user binds everything, these too.
	noRBAC := mustRender(t, "rbac: {create: false}")
	if slices.ContainsFunc(noRBAC, isSecureRBAC) {
		t.Error("rbac.create false still renders the secure port's RBAC objects")
	}
	if c, _ := agentPod(t, "rbac: {create: false}"); securePort(c) == nil {
		t.Error("rbac.create false drops the secure port itself")
	}
}

// TestChartSecureValues: secure.port is the flag's port and the container
// port's; metricsOnly adds --secure-metrics-only (and the NOTES read
// /metrics on the secure port); tlsSecret mounts the Secret read-only
// beside the configuration (not in it: a mount point inside the read-only
// ConfigMap volume could not be made) and passes its two files.
func TestChartSecureValues(t *testing.T) {
	c, _ := agentPod(t, "secure: {port: 10250}")
	if got := secureArgs(c); !slices.Equal(got, []string{"--secure-bind-address=:10250"}) {
		t.Errorf("secure.port 10250: secure args %v", got)
	}
	assertYAMLEqual(t, "secure.port 10250", securePort(c), `{name: secure, containerPort: 10250, protocol: TCP}`)

	c, _ = agentPod(t, "secure: {metricsOnly: true}")
	if got := secureArgs(c); !slices.Equal(got, []string{"--secure-bind-address=:9732", "--secure-metrics-only"}) {
		t.Errorf("secure.metricsOnly: secure args %v; want --secure-bind-address=:9732 --secure-metrics-only", got)
	}
	if notes := renderNotes(t, "secure: {metricsOnly: true}"); !strings.Contains(notes, "https://localhost:9732/metrics") ||
		strings.Contains(notes, "localhost:9731/metrics") {
		t.Errorf("secure.metricsOnly: the NOTES do not read /metrics on the secure port:\n%s", notes)
	}

	vals := "{secure: {tlsSecret: evictd-serving}, thresholds: {hard: {memory.available: 1Gi}}}"
	c, vols := agentPod(t, vals)
	if got := secureArgs(c); !slices.Equal(got, []string{"--secure-bind-address=:9732",
		"--tls-cert-file=/etc/evictd-tls/tls.crt", "--tls-private-key-file=/etc/evictd-tls/tls.key"}) {
		t.Errorf("secure.tlsSecret: secure args %v; want the Secret's tls.crt and tls.key", got)
	}
	assertYAMLEqual(t, "tls mount", mountNamed(c, "tls"), `{name: tls, mountPath: /etc/evictd-tls, readOnly: true}`)
	assertYAMLEqual(t, "tls volume", vols["tls"], `{name: tls, secret: {secretName: evictd-serving, defaultMode: 0400}}`)
	if config := mountNamed(c, "config"); config == nil || strings.HasPrefix("/etc/evictd-tls", config["mountPath"].(string)+"/") {
		t.Errorf("config mount %v: want it, and the TLS mount outside it", config)
	}
}

// TestChartSecureRefusals: values that would make a DaemonSet the API
// server refuses (two container ports of one number) or pods that evictd
// refuses at start (--secure-metrics-only or a certificate without the
// secure port) are refused at render, each naming the values; so is
// metricsOnly with a monitor, which would scrape a plain port without
// /metrics.
func TestChartSecureRefusals(t *testing.T) {
	for _, tc := range []struct {
		values string
		naming []string // what the error must mention
	}{
		{`secure: {port: 0}`, []string{"port"}},
		{`secure: {port: 65536}`, []string{"port"}},
		{`secure: {port: "9732"}`, []string{"port"}},
		{`secure: {port: 9731}`, []string{"secure.port 9731 is metrics.port", "9732"}},
		{`metrics: {port: 9732}`, []string{"secure.port 9732 is metrics.port"}},
		{`secure: {enabled: false, metricsOnly: true}`, []string{"secure.metricsOnly needs secure.enabled"}},
		{`secure: {enabled: false, tlsSecret: evictd-serving}`, []string{`secure.tlsSecret "evictd-serving" needs secure.enabled`}},
		{`{secure: {metricsOnly: true}, metrics: {serviceMonitor: {enabled: true}}}`, []string{"secure.metricsOnly", "metrics.serviceMonitor", metricsReader}},
		{`{secure: {metricsOnly: true}, metrics: {podMonitor: {enabled: true}}}`, []string{"secure.metricsOnly", "metrics.podMonitor"}},
		{`secure: {tlsSecret: Evictd_TLS}`, []string{"tlsSecret"}},
		{`secure: {enabled: "true"}`, []string{"enabled"}},
		{`secure: {tls: evictd-serving}`, []string{"tls"}},
	} {
		_, err := render(t, tc.values)
		if err == nil {
			t.Errorf("values %q rendered; want a refusal", tc.values)
			continue
		}
		for _, n := range tc.naming {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("values %q: the error does not say %q:\n%v", tc.values, n, err)
			}
		}
	}
	// The secure port off, its port may be anything, metrics.port's too.
	mustRender(t, "{secure: {enabled: false}, metrics: {port: 9732}}")
}
