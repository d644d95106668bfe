// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/pkg/thresholds"
)

func TestSplitCmdline(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"/usr/bin/kubelet\x00--config=/a b\x00--v=2\x00", []string{"/usr/bin/kubelet", "--config=/a b", "--v=2"}},
		{"", nil},
		{"kubelet", []string{"kubelet"}}, // a rewritten cmdline may lack the last NUL
	} {
		if got := SplitCmdline([]byte(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("SplitCmdline(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if !IsKubelet([]string{"/usr/local/bin/kubelet", "--v=2"}) || IsKubelet([]string{"/usr/bin/kubelet-wrapper"}) || IsKubelet(nil) {
		t.Error("IsKubelet: want argv[0]'s base name to be exactly kubelet")
	}
}

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs([]string{
		"--v=2", "--config", "/etc/k/config.yaml", "--config_dir=/etc/k/d",
		"--eviction-hard=memory.available<500Mi", "--eviction-hard", "nodefs.available<5%",
		"--eviction-minimum-reclaim=memory.available=100Mi", "--node-ip", "10.0.0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Config != "/etc/k/config.yaml" || a.ConfigDir != "/etc/k/d" {
		t.Errorf("config %q, dir %q", a.Config, a.ConfigDir)
	}
	if want := map[string]string{"memory.available": "500Mi", "nodefs.available": "5%"}; !maps.Equal(a.Hard, want) {
		t.Errorf("hard %v, want %v (repeated flags add up)", a.Hard, want)
	}
	if a.MinReclaim["memory.available"] != "100Mi" || a.Soft != nil {
		t.Errorf("min reclaim %v, soft %v", a.MinReclaim, a.Soft)
	}
	if _, err := ParseArgs([]string{"--eviction-hard"}); err == nil || !strings.Contains(err.Error(), "--eviction-hard has no value") {
		t.Errorf("a flag without its value: %v", err)
	}
	if _, err := ParseArgs([]string{"--eviction-hard=memory.available"}); err == nil || !strings.Contains(err.Error(), `"memory.available" is not SIGNAL<VALUE`) {
		t.Errorf("a statement without <: %v", err)
	}
	if _, err := ParseArgs([]string{"-config=/x"}); err == nil || !strings.Contains(err.Error(), "-config=/x: the kubelet reads a single dash") {
		t.Errorf("a single dash: %v", err)
	}
}

func TestParseKubeadmEnv(t *testing.T) {
	got, err := ParseKubeadmEnv([]byte("# written by kubeadm\nKUBELET_KUBEADM_ARGS=\"--a=1 --config /x\"\n"))
	if err != nil || !slices.Equal(got, []string{"--a=1", "--config", "/x"}) {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := ParseKubeadmEnv([]byte("KUBELET_KUBEADM_ARGS=\"--a=1\n")); err == nil || !strings.Contains(err.Error(), "unterminated") {
		t.Errorf("unterminated quote: %v", err)
	}
	if _, err := ParseKubeadmEnv([]byte("OTHER=1\n")); err == nil {
		t.Error("no KUBELET_KUBEADM_ARGS line: want an error")
	}
}

func TestParseFile(t *testing.T) {
	for _, c := range []struct{ name, in, err string }{
		{"empty", "  \n", "empty file"},
		{"kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", `kind "KubeProxyConfiguration"`},
		{"apiVersion", "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", `apiVersion "kubelet.config.k8s.io/v1": want kubelet.config.k8s.io/v1beta1`},
		{"no apiVersion", "kind: KubeletConfiguration\n", "no apiVersion/kind"},
		{"type", kc + "evictionHard: [memory.available]\n", "evictionHard of type map[string]string"},
		{"yaml", kc + "evictionHard: {\n", "yaml"},
		{"not an object", "- a\n", "not a YAML or JSON object"},
	} {
		_, err := ParseFile([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
		}
	}
}

func TestParseHard(t *testing.T) {
	got, ignored, err := ParseHard(map[string]string{"memory.available": "750Mi", "containerfs.available": "10%", "nodefs.available": "0%"})
	if err != nil {
		t.Fatal(err)
	}
	if got[thresholds.MemoryAvailable].String() != "750Mi" || got[thresholds.AllocatableMemoryAvailable].String() != "750Mi" {
		t.Errorf("memory %v, allocatable %v: want 750Mi for both (allocatable follows)", got[thresholds.MemoryAvailable], got[thresholds.AllocatableMemoryAvailable])
	}
	if _, ok := got[thresholds.NodeFsAvailable]; ok {
		t.Error("nodefs.available<0%: the kubelet has no threshold then")
	}
	if !slices.Equal(ignored, []string{"containerfs.available"}) {
		t.Errorf("ignored %v", ignored)
	}
	if _, _, err := ParseHard(map[string]string{"memory.available": "lots"}); err == nil || !strings.Contains(err.Error(), "lots") {
		t.Errorf("a bad value: %v", err)
	}
}

func raw(r *Result) map[string]string {
	out := map[string]string{}
	for s, v := range r.Hard {
		out[string(s)] = v.String()
	}
	return out
}

// TestRead reads fixture host roots laid out as a node's: /proc/PID/cmdline
// NUL-separated, the kubelet's files where kubeadm and distributions put
// them.
func TestRead(t *testing.T) {
	for _, c := range []struct {
		root, config string
		want         map[string]string
		from         []string
	}{
		{"kubeadm", "", map[string]string{"memory.available": "750Mi", "allocatableMemory.available": "750Mi", "nodefs.available": "10%"},
			[]string{"kubelet pid 812", "config /var/lib/kubelet/config.yaml"}},
		// A drop-in's mergeDefaultEvictionSettings comes too late to fill
		// anything: the kubelet fills the defaults when it loads --config.
		{"dropins", "", map[string]string{"memory.available": "1Gi", "allocatableMemory.available": "1Gi",
			"nodefs.inodesFree": "5%", "imagefs.available": "25%"},
			[]string{"kubelet pid 2044", "config /etc/kubernetes/kubelet-config.json", "drop-ins 10-merge.conf,20-memory.conf"}},
		{"kubeadmenv", "", map[string]string{"memory.available": "600Mi", "allocatableMemory.available": "600Mi", "pid.available": "5%"},
			[]string{KubeadmFlagsEnv, "config /var/lib/kubelet/config.yaml", "flag --eviction-hard"}},
		{"fallback", "", map[string]string{"memory.available": "100Mi", "allocatableMemory.available": "100Mi", "nodefs.available": "10%",
			"nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"},
			[]string{"config /var/lib/kubelet/config.yaml", "the kubelet's defaults"}},
		// --kubelet-config names the file the kubelet's --config points
		// to, where evictd can see it.
		{"notmounted", KubeadmConfig, map[string]string{"memory.available": "750Mi", "allocatableMemory.available": "750Mi", "nodefs.available": "10%"},
			[]string{"kubelet pid 977", "config /var/lib/kubelet/config.yaml"}},
	} {
		t.Run(c.root, func(t *testing.T) {
			r, err := Read(Options{HostRoot: filepath.Join("testdata", c.root), ConfigPath: c.config})
			if err != nil {
				t.Fatal(err)
			}
			if got := raw(r); !maps.Equal(got, c.want) {
				t.Errorf("thresholds %v, want %v", got, c.want)
			}
			for _, f := range c.from {
				if !strings.Contains(r.From, f) {
					t.Errorf("from %q: want it to say %q", r.From, f)
				}
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	_, err := Read(Options{HostRoot: filepath.Join("testdata", "notmounted")})
	var nv *NotVisibleError
	if !errors.As(err, &nv) || nv.Path != "/etc/kubernetes/kubelet.yaml" || !strings.Contains(err.Error(), "kubelet pid 977") ||
		!strings.Contains(err.Error(), filepath.Join("testdata", "notmounted", "etc", "kubernetes")) {
		t.Errorf("a config outside the mounts: %v; want a NotVisibleError naming the file, the process and where to mount it", err)
	}
	_, err = Read(Options{HostRoot: filepath.Join("testdata", "bad")})
	if err == nil || !strings.Contains(err.Error(), "/var/lib/kubelet/config.yaml") || !strings.Contains(err.Error(), `"lots"`) {
		t.Errorf("a bad value: %v; want the file and the value named", err)
	}
	_, err = Read(Options{HostRoot: filepath.Join("testdata", "none")})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("no kubelet: %v; want ErrNotFound", err)
	}
	_, err = Read(Options{HostRoot: t.TempDir()})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "proc") {
		t.Errorf("no /proc at all: %v; want ErrNotFound saying why", err)
	}
	// An unreadable drop-in names itself.
	root := t.TempDir()
	dir := filepath.Join(root, "proc", "5")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte("kubelet\x00--config-dir=/d\x00"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(kubeletCgroup), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "d", "10-x.conf"), []byte(kc+"evictionHard: 3\n"), 0o644))
	_, err = Read(Options{HostRoot: root})
	if err == nil || !strings.Contains(err.Error(), "drop-in /d/10-x.conf") || !strings.Contains(err.Error(), "evictionHard") {
		t.Errorf("a bad drop-in: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadImageGC: the kubelet's image collection thresholds, read as it
// reads them: its defaults, the file, a drop-in over the file, the
// deprecated flag over both; a bad value names itself.
func TestReadImageGC(t *testing.T) {
	host := func(t *testing.T, cmdline, config, dropin string) string {
		root := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(root, "proc", "7"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "proc", "7", "cmdline"), []byte(cmdline), 0o644))
		must(t, os.WriteFile(filepath.Join(root, "proc", "7", "cgroup"), []byte(kubeletCgroup), 0o644))
		must(t, os.MkdirAll(filepath.Join(root, "etc", "kubelet.d"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "etc", "kubelet.yaml"), []byte(kc+config), 0o644))
		if dropin != "" {
			must(t, os.WriteFile(filepath.Join(root, "etc", "kubelet.d", "10-gc.conf"), []byte(kc+dropin), 0o644))
		}
		return root
	}
	base := "kubelet\x00--config=/etc/kubelet.yaml\x00--config-dir=/etc/kubelet.d\x00"
	for _, c := range []struct {
		name, cmdline, config, dropin string
		want                          ImageGC
	}{
		{"defaults", base, "", "", ImageGC{High: 85, Low: 80}},
		{"file", base, "imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 70\n", "", ImageGC{High: 90, Low: 70}},
		{"drop-in over the file", base, "imageGCHighThresholdPercent: 90\n", "imageGCHighThresholdPercent: 95\n", ImageGC{High: 95, Low: 80}},
		{"flag over both", base + "--image-gc-high-threshold=100\x00", "imageGCHighThresholdPercent: 90\n", "", ImageGC{High: 100, Low: 80}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Read(Options{HostRoot: host(t, c.cmdline, c.config, c.dropin)})
			if err != nil {
				t.Fatal(err)
			}
			if r.ImageGC != c.want {
				t.Errorf("image collection %+v, want %+v", r.ImageGC, c.want)
			}
		})
	}
	if g := (ImageGC{High: 85}); g.FreeShare() != 0.15 || g.Off() {
		t.Errorf("85%%: free share %v, off %v; want 0.15 and on", g.FreeShare(), g.Off())
	}
	if g := (ImageGC{High: 100}); g.FreeShare() != 0 || !g.Off() {
		t.Errorf("100%%: free share %v, off %v; want 0 and off", g.FreeShare(), g.Off())
	}
	for _, c := range []struct{ cmdline, config, want string }{
		{base + "--image-gc-high-threshold=lots\x00", "", `--image-gc-high-threshold=lots: want a whole percentage, not "lots"`},
		{base, "imageGCHighThresholdPercent: 120\n", "imageGCHighThresholdPercent 120: want 0..100"},
		{base, "imageGCHighThresholdPercent: 70\n", "imageGCLowThresholdPercent 80 is not below imageGCHighThresholdPercent 70"},
	} {
		_, err := Read(Options{HostRoot: host(t, c.cmdline, c.config, "")})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q: error %v, want %q", c.cmdline, c.config, err, c.want)
		}
	}
}

// TestHardFrom: each threshold says where it came from, through the
// kubelet's steps.
func TestHardFrom(t *testing.T) {
	f, err := ParseFile([]byte(kc + "evictionHard: {memory.available: 1Gi, nodefs.available: 7%}\nmergeDefaultEvictionSettings: true\n"))
	must(t, err)
	c := LoadFile(f, "/etc/kubelet.yaml")
	d1, err := ParseDropin([]byte(kc + "evictionHard: {nodefs.available: 12%, imagefs.inodesFree: null}\n"))
	must(t, err)
	d2, err := ParseDropin([]byte(kc + "evictionHard: {nodefs.available: 12%, pid.available: 5%}\n"))
	must(t, err)
	c, err = MergeDropins(c, []Dropin{{Path: "/d/10.conf", JSON: d1}, {Path: "/d/20.conf", JSON: d2}})
	must(t, err)
	want := map[string]string{
		"memory.available":  "config /etc/kubelet.yaml",
		"nodefs.available":  "drop-in /d/10.conf", // 20.conf repeats it: no change
		"nodefs.inodesFree": fromMergeDefault,
		"imagefs.available": fromMergeDefault,
		"pid.available":     "drop-in /d/20.conf",
	}
	if !maps.Equal(c.HardFrom, want) {
		t.Errorf("from %v, want %v", c.HardFrom, want)
	}
	c = ApplyFlags(c, Args{Hard: map[string]string{"memory.available": "2Gi"}})
	if want := map[string]string{"memory.available": "flag --eviction-hard"}; !maps.Equal(c.HardFrom, want) {
		t.Errorf("after the flag: from %v, want %v", c.HardFrom, want)
	}
	if c := LoadFile(File{}, "/x"); c.HardFrom["memory.available"] != fromDefault {
		t.Errorf("no evictionHard: from %v", c.HardFrom)
	}
}

// TestReadHostSymlinks: a link on the host is followed as the host
// follows it: an absolute target from the host root, not from evictd's /.
func TestReadHostSymlinks(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "proc", "9"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "proc", "9", "cmdline"), []byte("kubelet\x00--config=/var/lib/kubelet/config.yaml\x00--config-dir=/var/lib/kubelet/conf.d\x00"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "proc", "9", "cgroup"), []byte(kubeletCgroup), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "var", "lib", "kubelet", "conf.d"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "etc", "evictd-test-kubelet", "parts"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc", "evictd-test-kubelet", "kubelet.yaml"), []byte(kc+"evictionHard: {memory.available: 700Mi}\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "etc", "evictd-test-kubelet", "parts", "pid.yaml"), []byte(kc+"evictionHard: {pid.available: 7%}\n"), 0o644))
	must(t, os.Symlink("/etc/evictd-test-kubelet/kubelet.yaml", filepath.Join(root, "var", "lib", "kubelet", "config.yaml")))
	// A link through a linked directory, with "..": /etc/p -> /etc/evictd-test-kubelet/parts/../parts.
	must(t, os.Symlink("/etc/evictd-test-kubelet/parts/../parts", filepath.Join(root, "etc", "p")))
	must(t, os.Symlink("../../../../etc/p/pid.yaml", filepath.Join(root, "var", "lib", "kubelet", "conf.d", "10-pid.conf")))
	r, err := Read(Options{HostRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"memory.available": "700Mi", "pid.available": "7%"}; !maps.Equal(r.Raw, want) {
		t.Errorf("thresholds %v, want %v", r.Raw, want)
	}
	loop := filepath.Join(root, "var", "lib", "kubelet", "conf.d", "20-loop.conf")
	must(t, os.Symlink("20-loop.conf", loop))
	if _, err := Read(Options{HostRoot: root}); err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("a link to itself: %v", err)
	}
}

// TestReadRelativePaths: the kubelet reads a relative --config and
// --config-dir from its working directory, /proc/PID/cwd.
func TestReadRelativePaths(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "proc", "9"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "proc", "9", "cmdline"), []byte("kubelet\x00--config=kubelet.yaml\x00--config-dir=./conf.d\x00"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "proc", "9", "cgroup"), []byte(kubeletCgroup), 0o644))
	must(t, os.Symlink("/etc/kube", filepath.Join(root, "proc", "9", "cwd")))
	must(t, os.MkdirAll(filepath.Join(root, "etc", "kube", "conf.d"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc", "kube", "kubelet.yaml"), []byte(kc+"evictionHard: {memory.available: 700Mi}\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "etc", "kube", "conf.d", "10.conf"), []byte(kc+"evictionHard: {pid.available: 7%}\n"), 0o644))
	r, err := Read(Options{HostRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"memory.available": "700Mi", "pid.available": "7%"}; !maps.Equal(r.Raw, want) {
		t.Errorf("thresholds %v, want %v", r.Raw, want)
	}
	if !strings.Contains(r.From, "config /etc/kube/kubelet.yaml") || !strings.Contains(r.From, "drop-ins 10.conf in /etc/kube/conf.d") {
		t.Errorf("from %q: want the paths from the kubelet's working directory", r.From)
	}
}
