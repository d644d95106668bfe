// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// userCommands are the commands a user copies from each doc of docFiles
// and from the chart's NOTES, rendered for each preset (whose paths they
// name), by where they are.
func userCommands(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range docFiles {
		out[f] = commandsIn(readFile(t, f))
	}
	out[notesFile] = shellLines(renderNotes(t, ""))
	for _, p := range presets(t) {
		out["NOTES.txt with presets/"+p.name+".yaml"] = shellLines(renderNotes(t, p.values))
	}
	return out
}

// TestDocWaitsHaveTimeouts: every `kubectl rollout status` and `kubectl
// wait` a user runs from the docs or NOTES ends: it carries --timeout=
// (rollout status waits forever by default, wait 30 s).
func TestDocWaitsHaveTimeouts(t *testing.T) {
	waitRE := regexp.MustCompile(`\bkubectl\b.*\s(rollout status|wait)\s`)
	n := 0
	for where, cmds := range userCommands(t) {
		for _, c := range cmds {
			if !waitRE.MatchString(c + " ") {
				continue
			}
			n++
			if !strings.Contains(c, "--timeout=") {
				t.Errorf("%s: %q waits without --timeout=", where, c)
			}
		}
	}
	if n == 0 {
		t.Error("no doc shows a rollout status or a wait: the scan found nothing to check")
	}
}

// TestDocSkopeoCopiesAll: the image is an index of two architectures, and
// skopeo copies only the one of the machine it runs on unless told --all.
// Every skopeo copy in the docs, the Makefile and hack/ says --all
// (hack/image's TestPush proves the pushed index holds both).
func TestDocSkopeoCopiesAll(t *testing.T) {
	files := append([]string{"Makefile", "hack/image/main.go"}, docFiles...)
	more, err := filepath.Glob(repoPath(t, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		files = append(files, "docs/"+filepath.Base(m))
	}
	n := 0
	for _, f := range files {
		for i, l := range strings.Split(readFile(t, f), "\n") {
			if strings.Contains(l, "skopeo copy") {
				n++
				if !strings.Contains(l, "skopeo copy --all") {
					t.Errorf("%s:%d: %q copies one architecture of the two: want skopeo copy --all", f, i+1, strings.TrimSpace(l))
				}
			}
		}
	}
	if n == 0 {
		t.Error("no doc shows skopeo copy: docs/install.md should")
	}
}

// TestCheckCommandPerPreset: the check's `evictd observe --image-fs=` is
// the image store the release mounts, for every preset. docs/install.md's
// table of distributions names each preset's image store, which its check
// tells the user to pass; that store must be the preset's --image-fs and
// mounted at its path under /host, and NOTES (rendered with the preset)
// must give it (and the --cgroup-root the preset passes). The check commands of docs/install.md and README.md,
// written for the defaults, must give the defaults' store.
func TestCheckCommandPerPreset(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| [^|]+ \\| (`([a-z0-9]+)\\.yaml`|\\(defaults\\)) \\| [^|]+ \\| `([^`]+)`")
	rows := row.FindAllStringSubmatch(readFile(t, "docs/install.md"), -1)
	stores := map[string]string{} // preset ("" for the defaults) -> image store
	for _, r := range rows {
		stores[r[2]] = r[3]
	}
	values := map[string]string{"": ""}
	for _, p := range presets(t) {
		values[p.name] = p.values
		if _, ok := stores[p.name]; !ok {
			t.Errorf("docs/install.md's table of distributions has no row for presets/%s.yaml", p.name)
		}
	}
	if _, ok := stores[""]; !ok {
		t.Fatal("docs/install.md's table of distributions has no (defaults) row")
	}
	for name, store := range stores {
		v, ok := values[name]
		if !ok {
			t.Errorf("docs/install.md names a preset %s.yaml, which deploy/helm/evictd/presets lacks", name)
			continue
		}
		what := "presets/" + name + ".yaml"
		if name == "" {
			what = "the defaults"
		}
		flag := "--image-fs=" + store
		ds := find(t, mustRender(t, v), "DaemonSet", "evictd")
		c := nested[[]any](t, ds, "spec", "template", "spec", "containers")[0].(map[string]any)
		args, _, _ := unstructured.NestedStringSlice(c, "args")
		if !slices.Contains(args, flag) {
			t.Errorf("%s: docs/install.md says the image store is %s; the agent runs with %v", what, store, args)
		}
		mounted := false
		for _, m := range c["volumeMounts"].([]any) {
			mounted = mounted || m.(map[string]any)["mountPath"] == "/host"+store
		}
		if !mounted {
			t.Errorf("%s: nothing is mounted at /host%s, where the check's %s reads", what, store, flag)
		}
		// The pods' cgroup root too, where the release passes one (kind).
		check := "/evictd observe -o table --host-root=/host " + flag
		for _, a := range args {
			if strings.HasPrefix(a, "--cgroup-root=") {
				check += " " + a
			}
		}
		notes := renderNotes(t, v)
		if !strings.Contains(notes, check+"\n") {
			t.Errorf("%s: NOTES' check is not %q:\n%s", what, check, notes)
		}
	}
	for _, f := range []string{"docs/install.md", "README.md"} {
		for _, c := range commandsIn(readFile(t, f)) {
			if !strings.Contains(c, "/evictd observe") {
				continue
			}
			fs := regexp.MustCompile(`--image-fs=(\S+)`).FindStringSubmatch(c)
			if fs == nil || fs[1] != stores[""] || strings.Contains(c, "--container-fs") {
				t.Errorf("%s: the check %q; want --image-fs=%s, the defaults' image store (section 3 of docs/install.md gives the others)", f, c, stores[""])
			}
		}
	}
}
