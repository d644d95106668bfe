// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/pkg/thresholds"
)

// A kubeletCase is one way a kubelet is configured, and the eviction
// settings kubelet v1.37.2 comes to with it. docs/run.md's table (*How
// evictd reads the kubelet's thresholds*) has a row for each, by name;
// TestKubeletCases reads each with Read, and TestKubeletCasesRealKubelet
// starts the real kubelet on each and reads what it logs.
type kubeletCase struct {
	name string
	// config is the --config file's content; "" runs the kubelet without
	// --config.
	config string
	// dropins are --config-dir's files, by path in the directory; nil
	// runs the kubelet without --config-dir.
	dropins map[string]string
	// links are symbolic links to make in the directory (name to target)
	// after the files; a name "." makes --config-dir itself a link to the
	// directory of the files.
	links map[string]string
	flags []string
	// hard is the kubelet's evictionHard (nil: none); gc its image
	// collection thresholds (zero: the defaults, 85 and 80).
	hard map[string]string
	gc   ImageGC
	// enforce is the kubelet's enforceNodeAllocatable (nil: its default,
	// pods), and alloc the allocatableMemory.available threshold it
	// has then (nil: the copy of memory.available, none without it).
	enforce []string
	alloc   *string
	// err is what Read's error must say when the kubelet refuses the
	// configuration, and kubeletErr what the kubelet's own error says.
	err, kubeletErr string
}

const kc = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

var defaultsWith = func(kv ...string) map[string]string {
	m := DefaultHard()
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

var kubeletCases = []kubeletCase{
	{name: "no-config", hard: nil},
	{name: "no-config-flag", flags: []string{"--eviction-hard=memory.available<500Mi"},
		hard: map[string]string{"memory.available": "500Mi"}},
	{name: "no-config-dropin", dropins: map[string]string{"10-a.conf": kc + "evictionHard: {nodefs.available: 20%}\n"},
		hard: map[string]string{"nodefs.available": "20%"}},
	{name: "file-without-evictionHard", config: kc + "cgroupDriver: systemd\n", hard: DefaultHard()},
	{name: "file-partial", config: kc + "evictionHard: {memory.available: 750Mi}\n",
		hard: map[string]string{"memory.available": "750Mi"}},
	{name: "file-partial-merge-defaults", config: kc + "mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 750Mi}\n",
		hard: defaultsWith("memory.available", "750Mi")},
	{name: "file-empty-map", config: kc + "evictionHard: {}\n", hard: nil},
	{name: "file-empty-map-merge-defaults", config: kc + "mergeDefaultEvictionSettings: true\nevictionHard: {}\n", hard: DefaultHard()},
	{name: "file-null", config: kc + "evictionHard: null\n", hard: DefaultHard()},
	{name: "file-field-case", config: kc + "EvictionHard: {memory.available: 5Gi}\n", hard: DefaultHard()},
	{name: "file-json", config: `{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "evictionHard": {"memory.available": "1Gi"}}`,
		hard: map[string]string{"memory.available": "1Gi"}},
	{name: "dropin-over-defaults", config: kc, dropins: map[string]string{"10-a.conf": kc + "evictionHard: {memory.available: 500Mi}\n"},
		hard: defaultsWith("memory.available", "500Mi")},
	{name: "dropin-merges-keys", config: kc + "evictionHard: {memory.available: 1Gi, nodefs.available: 7%}\n",
		dropins: map[string]string{"10-a.conf": kc + "evictionHard: {memory.available: 2Gi}\n"},
		hard:    map[string]string{"memory.available": "2Gi", "nodefs.available": "7%"}},
	{name: "dropin-merge-defaults-too-late", config: kc + "evictionHard: {memory.available: 1Gi}\n",
		dropins: map[string]string{"10-a.conf": kc + "mergeDefaultEvictionSettings: true\n"},
		hard:    map[string]string{"memory.available": "1Gi"}},
	{name: "dropin-cannot-unmerge-defaults", config: kc + "mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 1Gi}\n",
		dropins: map[string]string{"10-a.conf": kc + "mergeDefaultEvictionSettings: false\n"},
		hard:    defaultsWith("memory.available", "1Gi")},
	{name: "dropin-null-key", config: kc + "evictionHard: {memory.available: 1Gi, nodefs.available: 7%}\n",
		dropins: map[string]string{"10-a.conf": kc + "evictionHard: {memory.available: null}\n"},
		hard:    map[string]string{"nodefs.available": "7%"}},
	{name: "dropin-null-map", config: kc + "evictionHard: {memory.available: 1Gi}\n",
		dropins: map[string]string{"10-a.conf": kc + "evictionHard: null\n"}, hard: nil},
	{name: "dropin-empty-map", config: kc + "evictionHard: {memory.available: 1Gi}\n",
		dropins: map[string]string{"10-a.conf": kc + "evictionHard: {}\n"},
		hard:    map[string]string{"memory.available": "1Gi"}},
	{name: "dropin-order", config: kc, dropins: map[string]string{
		"20-b.conf": kc + "evictionHard: {memory.available: 2Gi}\n",
		"10-a.conf": kc + "evictionHard: {memory.available: 1Gi, nodefs.available: 12%}\n",
	}, hard: defaultsWith("memory.available", "2Gi", "nodefs.available", "12%")},
	{name: "dropin-subdirectory", config: kc + "evictionHard: {memory.available: 500Mi}\n", dropins: map[string]string{
		"10-a.conf":     kc + "evictionHard: {memory.available: 1Gi}\n",
		"sub/05-b.conf": kc + "evictionHard: {memory.available: 2Gi}\n",
	}, hard: map[string]string{"memory.available": "2Gi"}},
	{name: "dropin-only-conf", config: kc + "evictionHard: {memory.available: 500Mi}\n", dropins: map[string]string{
		"README":         "evictionHard: {memory.available: 9Gi}\n",
		"10-a.yaml":      kc + "evictionHard: {memory.available: 9Gi}\n",
		"20-a.conf.bak":  kc + "evictionHard: {memory.available: 9Gi}\n",
		"30-a.conf":      kc + "evictionHard: {nodefs.available: 20%}\n",
		"40-dir.conf/x":  "not a drop-in",
		"40-dir.conf/y1": "nor this",
	}, hard: map[string]string{"memory.available": "500Mi", "nodefs.available": "20%"}},
	{name: "dropin-symlink", config: kc, dropins: map[string]string{"shared/mem.yaml": kc + "evictionHard: {memory.available: 3Gi}\n"},
		links: map[string]string{"20-mem.conf": "shared/mem.yaml"}, hard: defaultsWith("memory.available", "3Gi")},
	{name: "dropin-dir-symlink", config: kc + "evictionHard: {memory.available: 1Gi}\n",
		dropins: map[string]string{"10-a.conf": kc + "evictionHard: {memory.available: 2Gi}\n"},
		links:   map[string]string{".": ""}, hard: map[string]string{"memory.available": "1Gi"}},
	{name: "dropin-no-apiversion", config: kc, dropins: map[string]string{"10-a.conf": "kind: KubeletConfiguration\nevictionHard: {memory.available: 2Gi}\n"},
		err: "no apiVersion/kind", kubeletErr: "10-a.conf"},
	{name: "flag-over-file", config: kc + "evictionHard: {memory.available: 1Gi, nodefs.available: 20%}\n",
		flags: []string{"--eviction-hard=memory.available<2Gi"}, hard: map[string]string{"memory.available": "2Gi"}},
	{name: "flag-over-dropin", config: kc, dropins: map[string]string{"10-a.conf": kc + "evictionHard: {memory.available: 3Gi}\n"},
		flags: []string{"--eviction-hard", "memory.available<2Gi"}, hard: map[string]string{"memory.available": "2Gi"}},
	{name: "flag-empty", config: kc + "evictionHard: {memory.available: 1Gi}\n", flags: []string{"--eviction-hard="}, hard: nil},
	{name: "flag-repeated", config: kc, flags: []string{"--eviction-hard=memory.available<1Gi,memory.available<2Gi", "--eviction-hard= nodefs.available < 20% ,"},
		hard: map[string]string{"memory.available": "2Gi", "nodefs.available": "20%"}},
	{name: "flag-underscore", config: kc + "evictionHard: {memory.available: 1Gi}\n", flags: []string{"--eviction_hard=memory.available<3Gi"},
		hard: map[string]string{"memory.available": "3Gi"}},
	{name: "flag-single-dash", config: kc, flags: []string{"-eviction-hard=memory.available<3Gi"},
		err: "single dash", kubeletErr: "unknown shorthand flag"},
	{name: "enforce-none-in-file", config: kc + "enforceNodeAllocatable: []\nevictionHard: {memory.available: 1Gi}\n",
		hard: map[string]string{"memory.available": "1Gi"}, enforce: []string{}, alloc: strp("")},
	{name: "enforce-none-then-dropin", config: kc + "enforceNodeAllocatable: []\nevictionHard: {memory.available: 1Gi}\n",
		dropins: map[string]string{"10-a.conf": kc + "evictionHard: {pid.available: 5%}\n"},
		hard:    map[string]string{"memory.available": "1Gi", "pid.available": "5%"}},
	{name: "enforce-flag", config: kc + "evictionHard: {memory.available: 1Gi}\n", flags: []string{"--enforce-node-allocatable=system-reserved"},
		hard: map[string]string{"memory.available": "1Gi"}, enforce: []string{"system-reserved"}, alloc: strp("")},
	{name: "allocatable-named-below-memory", config: kc + "evictionHard: {memory.available: 1Gi, allocatableMemory.available: 500Mi}\n",
		hard: map[string]string{"memory.available": "1Gi", "allocatableMemory.available": "500Mi"}, alloc: strp("1Gi")},
	{name: "allocatable-ignore-eviction", config: kc + "evictionHard: {memory.available: 1Gi}\n", flags: []string{"--experimental-allocatable-ignore-eviction"},
		hard: map[string]string{"memory.available": "1Gi"}, alloc: strp("")},
	{name: "gc-file", config: kc + "imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 70\n", hard: DefaultHard(), gc: ImageGC{High: 90, Low: 70}},
	{name: "gc-dropin-null", config: kc + "imageGCHighThresholdPercent: 95\nimageGCLowThresholdPercent: 70\n",
		dropins: map[string]string{"10-a.conf": kc + "imageGCHighThresholdPercent: null\n"}, hard: DefaultHard(), gc: ImageGC{High: 85, Low: 70}},
	{name: "gc-flag", config: kc + "imageGCHighThresholdPercent: 95\n", dropins: map[string]string{"10-a.conf": kc + "imageGCHighThresholdPercent: 97\n"},
		flags: []string{"--image-gc-high-threshold=0x5A", "--image_gc_low_threshold=050"}, hard: DefaultHard(), gc: ImageGC{High: 90, Low: 40}},
	{name: "gc-low-equals-high", config: kc + "imageGCHighThresholdPercent: 80\n",
		err: "imageGCLowThresholdPercent 80 is not below imageGCHighThresholdPercent 80", kubeletErr: "imageGCLowThresholdPercent (--image-gc-low-threshold) 80 must be less than"},
}

// host lays c out as a node's files under a new host root, the kubelet's
// command line in proc/7/cmdline; argv is that command line with the
// paths under root, for the real kubelet.
func (c kubeletCase) host(t *testing.T) (root string, argv []string) {
	root = t.TempDir()
	hostArgs := []string{}
	realArgs := []string{}
	if c.config != "" {
		must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "etc", "kubelet.yaml"), []byte(c.config), 0o644))
		hostArgs = append(hostArgs, "--config=/etc/kubelet.yaml")
		realArgs = append(realArgs, "--config="+filepath.Join(root, "etc", "kubelet.yaml"))
	}
	if c.dropins != nil {
		dir := filepath.Join(root, "etc", "kubelet.d")
		files := dir
		if _, ok := c.links["."]; ok {
			files = filepath.Join(root, "etc", "kubelet.d.real")
		}
		must(t, os.MkdirAll(files, 0o755))
		for name, content := range c.dropins {
			must(t, os.MkdirAll(filepath.Dir(filepath.Join(files, name)), 0o755))
			must(t, os.WriteFile(filepath.Join(files, name), []byte(content), 0o644))
		}
		for name, target := range c.links {
			if name == "." {
				must(t, os.Symlink("kubelet.d.real", dir))
				continue
			}
			must(t, os.Symlink(target, filepath.Join(files, name)))
		}
		hostArgs = append(hostArgs, "--config-dir=/etc/kubelet.d")
		realArgs = append(realArgs, "--config-dir="+dir)
	}
	hostArgs = append(hostArgs, c.flags...)
	realArgs = append(realArgs, c.flags...)
	must(t, os.MkdirAll(filepath.Join(root, "proc", "7"), 0o755))
	cmdline := strings.Join(append([]string{"/usr/bin/kubelet"}, hostArgs...), "\x00") + "\x00"
	must(t, os.WriteFile(filepath.Join(root, "proc", "7", "cmdline"), []byte(cmdline), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "proc", "7", "cgroup"), []byte(kubeletCgroup), 0o644))
	return root, realArgs
}

func (c kubeletCase) wantAlloc() string {
	if c.alloc != nil {
		return *c.alloc
	}
	return c.hard["memory.available"]
}

func (c kubeletCase) wantEnforce() []string {
	if c.enforce == nil {
		return []string{"pods"}
	}
	return c.enforce
}

func (c kubeletCase) wantGC() ImageGC {
	if c.gc == (ImageGC{}) {
		return ImageGC{High: DefaultImageGCHigh, Low: DefaultImageGCLow}
	}
	return c.gc
}

// TestKubeletCases: Read comes to the kubelet's settings in every case.
func TestKubeletCases(t *testing.T) {
	for _, c := range kubeletCases {
		t.Run(c.name, func(t *testing.T) {
			root, _ := c.host(t)
			r, err := Read(Options{HostRoot: root})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v; want one saying %q (the kubelet refuses this configuration)", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.hard
			if want == nil {
				want = map[string]string{}
			}
			if !maps.Equal(r.Raw, want) {
				t.Errorf("evictionHard %v, want the kubelet's %v (from %s)", r.Raw, want, r.From)
			}
			if r.ImageGC != c.wantGC() {
				t.Errorf("image collection %+v, want the kubelet's %+v", r.ImageGC, c.wantGC())
			}
			got := ""
			if v, ok := r.Hard[thresholds.AllocatableMemoryAvailable]; ok {
				got = v.String()
			}
			if got != c.wantAlloc() {
				t.Errorf("allocatableMemory.available %q, want the kubelet's %q", got, c.wantAlloc())
			}
		})
	}
}

// kubeletBinary is the kubelet hack/cluster builds (make cluster-bins),
// in EVICTD_BIN_DIR or the repository's _output/bin.
func kubeletBinary(t *testing.T) string {
	dir := os.Getenv("EVICTD_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "_output", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, "kubelet"))
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no kubelet binary: %v; run make cluster-bins", err)
		}
		t.Skipf("no kubelet binary (%v): run make cluster-bins", err)
	}
	return p
}

// TestKubeletCasesRealKubelet holds the table against the real kubelet:
// started on each case's files with --oom-score-adj out of range, it loads
// its configuration, logs the effective one ("Effective
// KubeletConfiguration") and stops at its validation, having started
// nothing.
func TestKubeletCasesRealKubelet(t *testing.T) {
	kubelet := kubeletBinary(t)
	out, err := exec.Command(kubelet, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v1.37.") {
		t.Fatalf("%s --version: %q, %v; the table is kubelet v1.37's", kubelet, out, err)
	}
	for _, c := range kubeletCases {
		t.Run(c.name, func(t *testing.T) {
			_, argv := c.host(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, kubelet, append(argv, "--oom-score-adj=5000")...)
			cmd.Dir = t.TempDir()
			log, _ := cmd.CombinedOutput()
			eff, ok := effectiveConfig(log)
			if c.kubeletErr != "" {
				_, failed, _ := bytes.Cut(log, []byte("command failed"))
				if !bytes.Contains(failed, []byte(c.kubeletErr)) {
					t.Fatalf("the kubelet did not refuse with %q:\n%s", c.kubeletErr, log)
				}
				return
			}
			if !ok {
				t.Fatalf("no effective configuration logged:\n%s", log)
			}
			// Decoded apart from File, which is under test.
			var f struct {
				Hard        map[string]string `json:"evictionHard"`
				ImageGCHigh *int32            `json:"imageGCHighThresholdPercent"`
				ImageGCLow  *int32            `json:"imageGCLowThresholdPercent"`
				Enforce     []string          `json:"enforceNodeAllocatable"`
			}
			if err := yaml.Unmarshal(eff, &f); err != nil {
				t.Fatalf("%v:\n%s", err, eff)
			}
			got, want := f.Hard, c.hard
			if got == nil {
				got = map[string]string{}
			}
			if want == nil {
				want = map[string]string{}
			}
			if !maps.Equal(got, want) {
				t.Errorf("the kubelet's evictionHard %v, the table's %v", got, want)
			}
			// The log leaves out an empty list.
			if got := append([]string{}, f.Enforce...); !slices.Equal(got, c.wantEnforce()) {
				t.Errorf("the kubelet's enforceNodeAllocatable %q, the table's %q", got, c.wantEnforce())
			}
			if g := (ImageGC{High: *f.ImageGCHigh, Low: *f.ImageGCLow}); g != c.wantGC() {
				t.Errorf("the kubelet's image collection %+v, the table's %+v", g, c.wantGC())
			}
		})
	}
}

// effectiveConfig is the YAML the kubelet logs as its effective
// configuration: klog's multi-line value, each line indented by a tab,
// between `config=<` and ` >`.
func effectiveConfig(log []byte) ([]byte, bool) {
	_, rest, ok := bytes.Cut(log, []byte("\"Effective KubeletConfiguration\" config=<\n"))
	if !ok {
		return nil, false
	}
	var out bytes.Buffer
	for _, line := range strings.Split(string(rest), "\n") {
		l, ok := strings.CutPrefix(line, "\t")
		if !ok {
			break
		}
		out.WriteString(l + "\n")
	}
	return out.Bytes(), true
}

// TestKubeletCasesDocumented: docs/run.md's table has a row for each case
// and no other.
func TestKubeletCasesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "run.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n| case (NAME) |")
	if !ok {
		t.Fatal("docs/run.md has no table of cases (a header starting | case (NAME) |)")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var rows []string
	for _, line := range strings.Split(table, "\n") {
		if m := caseRowRE.FindStringSubmatch(line); m != nil {
			rows = append(rows, m[1])
		}
	}
	var names []string
	for _, c := range kubeletCases {
		names = append(names, c.name)
	}
	if !slices.Equal(rows, names) {
		t.Errorf("docs/run.md's table of cases lists %q; the table here, in its order, %q", rows, names)
	}
}

// caseRowRE is a row of docs/run.md's table of cases: | `NAME` | ...
var caseRowRE = regexp.MustCompile("^\\| `([a-zA-Z0-9-]+)` \\|")

func strp(s string) *string { return &s }
