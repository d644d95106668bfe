// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/test/e2e/framework"
)

// releasedChart is the chart as CHANGELOG.md's newest release shipped it:
// testdata/evictd-VERSION.tgz, what `make release` wrote for it (kept in
// the tree, so that the test needs no git history), unpacked into a
// temporary directory. A release without its package there fails the test.
func releasedChart(t *testing.T) (version, chart string) {
	t.Helper()
	m := releasedRE.FindStringSubmatch(readFile(t, "CHANGELOG.md"))
	if m == nil {
		t.Fatal("CHANGELOG.md has no dated release")
	}
	pkg := repoPath(t, "test", "deploy", "testdata", "evictd-"+m[1]+".tgz")
	dir := t.TempDir()
	if b, err := exec.Command("tar", "-xzf", pkg, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s (the chart release %s shipped, from make release): %v\n%s", pkg, m[1], err, b)
	}
	chart = filepath.Join(dir, "evictd")
	if got := readChartVersion(t, chart); got != m[1] {
		t.Fatalf("%s holds the chart version %s, want %s", pkg, got, m[1])
	}
	return m[1], chart
}

func readChartVersion(t *testing.T, chart string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(regexp.MustCompile(`(?m)^version:\s*(\S+)`).FindStringSubmatch(string(b))[1])
}

// TestUpgradeFromRelease installs the chart as the newest release shipped
// it (releasedChart) with the real helm on the test API server, then
// upgrades it to this checkout's chart with docs/install.md's command as
// written (cmdUpgrade, which TestDocCommands holds to the docs): it must
// succeed and run the new chart. The form the docs gave before,
// --reuse-values, is run first and must fail: it reuses the old chart's
// defaults, which lack values the new templates read.
func TestUpgradeFromRelease(t *testing.T) {
	helm := repoPath(t, "_output", "tools", "helm")
	if st, err := os.Stat(helm); err != nil || st.Mode()&0o111 == 0 {
		framework.Require(t, errMissing("no executable "+helm+" (make _output/tools/helm)"))
	}
	kubectl := framework.RequireBinary(t, "kubectl")
	released, old := releasedChart(t)
	identity := filepath.Join(t.TempDir(), "identity.yaml")
	if err := os.WriteFile(identity, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: upgrade-test-identity}\n---\n"+
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: identity, namespace: upgrade-test-identity}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := framework.Start(t, func(cfg *framework.Config) { cfg.Manifest = identity })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	home := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(helm)+":"+filepath.Dir(kubectl)+":"+os.Getenv("PATH"),
		"KUBECONFIG="+c.AdminKubeconfig, "HOME="+home, "XDG_CACHE_HOME="+home+"/cache",
		"XDG_CONFIG_HOME="+home+"/config", "XDG_DATA_HOME="+home+"/data")
	sh := func(cmd string) (string, error) {
		x := exec.CommandContext(ctx, "bash", "-c", cmd)
		x.Dir, x.Env = repoPath(t), env
		out, err := x.CombinedOutput()
		return string(out), err
	}
	for _, cmd := range []string{cmdCreateNS, cmdLabelNS,
		"helm install evictd " + old + " -n evictd-system --set image.repository=registry.example.com/evictd --set image.tag=" + released} {
		if out, err := sh(cmd); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}
	reuse := strings.Replace(cmdUpgrade, "--reset-then-reuse-values", "--reuse-values", 1)
	if reuse == cmdUpgrade {
		t.Fatalf("the documented upgrade %q has no --reset-then-reuse-values", cmdUpgrade)
	}
	if out, err := sh(reuse); err == nil {
		t.Errorf("%s from the %s chart succeeded; the old chart's defaults should lack what the new chart reads:\n%s", reuse, released, out)
	} else {
		t.Logf("%s from the %s chart fails, as it should: %v\n%s", reuse, released, err, out)
	}
	out, err := sh(cmdUpgrade)
	if err != nil || !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("%s from the %s chart: %v\n%s", cmdUpgrade, released, err, out)
	}
	ds, err := c.Admin.AppsV1().DaemonSets("evictd-system").Get(ctx, "evictd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ds.Labels["helm.sh/chart"], "evictd-"+repoVersion(t); got != want {
		t.Errorf("after %s the DaemonSet is of chart %s; want %s", cmdUpgrade, got, want)
	}
	if got := ds.Spec.Template.Spec.Containers[0].Image; got != "registry.example.com/evictd:0.2.0" {
		t.Errorf("after %s the DaemonSet runs %s; want registry.example.com/evictd:0.2.0 (the install's repository, the upgrade's tag)", cmdUpgrade, got)
	}
}
