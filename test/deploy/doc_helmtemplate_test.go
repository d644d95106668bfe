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

	"github.com/evictd/evictd/test/e2e/framework"
)

// kubeVersionFlag is helm template's --kube-version with its value.
var kubeVersionFlag = regexp.MustCompile(`\s--kube-version[= ]\S+`)

// TestDocHelmTemplate runs every `helm template` command the docs show
// (docFiles), as written, with the real helm in the repository and no
// cluster to ask: each gives --kube-version, exits 0 and prints the
// chart's DaemonSet. The same command without --kube-version fails on the
// chart's kubeVersion (Helm assumes an old Kubernetes without a cluster),
// which is why the docs give it.
func TestDocHelmTemplate(t *testing.T) {
	helm := repoPath(t, "_output", "tools", "helm")
	if st, err := os.Stat(helm); err != nil || st.Mode()&0o111 == 0 {
		framework.Require(t, errMissing("no executable "+helm+" (make _output/tools/helm)"))
	}
	where := map[string][]string{}
	var cmds []string
	for _, f := range docFiles {
		for _, c := range commandsIn(readFile(t, f)) {
			if !strings.HasPrefix(c, "helm template ") {
				continue
			}
			if where[c] == nil {
				cmds = append(cmds, c)
			}
			where[c] = append(where[c], f)
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("none of %v shows a helm template command; docs/install.md must, with --kube-version", docFiles)
	}
	home := t.TempDir()
	// No kubeconfig: helm template must not need a cluster.
	env := append(os.Environ(), "PATH="+filepath.Dir(helm)+":"+os.Getenv("PATH"), "KUBECONFIG="+filepath.Join(home, "none"),
		"HOME="+home, "XDG_CACHE_HOME="+home+"/cache", "XDG_CONFIG_HOME="+home+"/config", "XDG_DATA_HOME="+home+"/data")
	run := func(cmd string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		x := exec.CommandContext(ctx, "bash", "-c", cmd)
		x.Dir, x.Env = repoPath(t), env
		out, err := x.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			out = append(out, ee.Stderr...)
		}
		return string(out), err
	}
	for _, c := range cmds {
		if !kubeVersionFlag.MatchString(c) {
			t.Errorf("%s: %q gives no --kube-version; without it helm template fails on the chart's kubeVersion", strings.Join(where[c], ", "), c)
			continue
		}
		out, err := run(c)
		if err != nil {
			t.Errorf("%s: %q: %v\n%s", strings.Join(where[c], ", "), c, err, out)
			continue
		}
		objs, err := framework.ParseManifest(strings.NewReader(out))
		if err != nil {
			t.Errorf("%q prints no manifest: %v", c, err)
			continue
		}
		if !has(objs, "DaemonSet") {
			t.Errorf("%q renders no DaemonSet", c)
		}
		t.Logf("%s: %q rendered %d objects", strings.Join(where[c], ", "), c, len(objs))
		without := kubeVersionFlag.ReplaceAllString(c, "")
		if out, err := run(without); err == nil || !strings.Contains(out, "requires kubeVersion") {
			t.Errorf("%q: %v\n%s\nwant it refused on the chart's kubeVersion, the reason the docs give --kube-version", without, err, out)
		}
	}
}
