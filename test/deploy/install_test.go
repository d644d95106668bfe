// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestChartInstallsTwice installs the chart for real, with Helm's install
// action as `helm install NAME deploy/helm/evictd -n NS --create-namespace`
// runs it, on the test API server, three times: release evictd in
// evictd-a, release second in the same namespace and release evictd
// again in evictd-b. Helm refuses to create an object that exists already
// (it belongs to another release), so each install succeeding proves that
// no two releases share a name, cluster-scoped ones included; the test then
// reads back that each release's objects are where and as named.
func TestChartInstallsTwice(t *testing.T) {
	c := framework.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	chrt, err := loader.Load(repoPath(t, "deploy", "helm", "evictd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []struct{ name, ns, fullname string }{
		{"evictd", "evictd-a", "evictd"},
		{"second", "evictd-a", "second-evictd"},
		{"evictd", "evictd-b", "evictd"},
	} {
		flags := genericclioptions.NewConfigFlags(false)
		flags.KubeConfig = &c.AdminKubeconfig
		flags.Namespace = &rel.ns
		cfg := new(action.Configuration)
		if err := cfg.Init(flags, rel.ns, "secret", func(string, ...any) {}); err != nil {
			t.Fatal(err)
		}
		install := action.NewInstall(cfg)
		install.ReleaseName = rel.name
		install.Namespace = rel.ns
		install.CreateNamespace = true
		install.Timeout = time.Minute
		// The thresholds make a ConfigMap, one more namespaced name.
		r, err := install.RunWithContext(ctx, chrt, map[string]any{"thresholds": map[string]any{"hard": map[string]any{"memory.available": "500Mi"}}})
		if err != nil {
			t.Fatalf("helm install %s -n %s: %v", rel.name, rel.ns, err)
		}
		t.Logf("release %s/%s: %s", rel.ns, rel.name, r.Info.Status)

		ds, err := c.Admin.AppsV1().DaemonSets(rel.ns).Get(ctx, rel.fullname, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("release %s/%s: %v", rel.ns, rel.name, err)
		}
		if got := ds.Spec.Selector.MatchLabels["app.kubernetes.io/instance"]; got != rel.name {
			t.Errorf("DaemonSet %s/%s selects instance %q; want %q", rel.ns, rel.fullname, got, rel.name)
		}
		if ds.Spec.Template.Spec.ServiceAccountName != rel.fullname {
			t.Errorf("DaemonSet %s/%s runs as %q", rel.ns, rel.fullname, ds.Spec.Template.Spec.ServiceAccountName)
		}
		if _, err := c.Admin.CoreV1().ConfigMaps(rel.ns).Get(ctx, rel.fullname+"-config", metav1.GetOptions{}); err != nil {
			t.Errorf("release %s/%s: %v", rel.ns, rel.name, err)
		}
		crb, err := c.Admin.RbacV1().ClusterRoleBindings().Get(ctx, rel.fullname+"-"+rel.ns, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("release %s/%s: %v", rel.ns, rel.name, err)
		}
		if len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != rel.ns || crb.Subjects[0].Name != rel.fullname ||
			crb.RoleRef.Name != rel.fullname+"-"+rel.ns {
			t.Errorf("ClusterRoleBinding %s binds %v to %v", crb.Name, crb.Subjects, crb.RoleRef)
		}
		if !strings.Contains(r.Info.Notes, "kubectl -n "+rel.ns+" logs ds/"+rel.fullname) {
			t.Errorf("NOTES do not tell how to read this release's logs:\n%s", r.Info.Notes)
		}
	}
	// --create-namespace made the namespaces; the chart did not (no
	// Namespace object unless namespace.create).
	for _, ns := range []string{"evictd-a", "evictd-b"} {
		n, err := c.Admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["app.kubernetes.io/managed-by"] == "Helm" {
			t.Errorf("namespace %s was rendered by the chart; want it left to --create-namespace", ns)
		}
	}
}
