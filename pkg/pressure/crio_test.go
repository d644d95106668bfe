// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"
)

// The CRI-O node of crioHostRoot (testdata/README.md, "CRI-O").
const (
	crioStore      = "/var/lib/containers/storage"
	crioWebSandbox = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0" // web-0's infrastructure container
	crioWebApp     = "3b8f1c2d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"
	crioWebSidecar = "e1d2c3b4a5968778695a4b3c2d1e0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2"
	crioWriterApp  = "8b610f972a5d8353adf0117c340d3d57c9c4ce8a35bb88c21373d9fdd96aded7" // the BestEffort pod, default/writer
	// Their read-write layers.
	crioWebSandboxLayer = "5aca7814cf01a4c5017675aad65611a4d9267ab6a1353cef051c3beec2d04193"
	crioWebAppLayer     = "afeea5953107dd5b4f3133a7795771d285c4b21b656f27db2b90909840d93328"
	crioWebSidecarLayer = "85f41b5a0a3d10ff6163903210d4ffe4c3691d339e1cfe391f2cd3eaa25e9c05"
	crioWriterLayer     = "5f80b8ed0707693892f8b1c40247c4b1aeb21db0d26457fe9f2907ef94e23bfc"
	// The writer's sandbox: a record and a layer, but no cgroup
	// (drop_infra_ctr).
	crioWriterSandbox      = "296de7342ab7f311941b1240c3759afcbc5f01af47af0cf8fda92d8286e976c2"
	crioWriterSandboxLayer = "598dbbb356f01063365f444987093913763279e1dbf3f568d8a514a0db10cf5a"
)

// crioHostRoot turns a copy of the v2-systemd fixture into a CRI-O node, as
// CRI-O's systemd cgroup manager and containers/storage lay it out: the
// containers' cgroups are crio-<ID>.scope, with conmon's beside each in
// crio-conmon-<ID>.scope (conmon_cgroup = "pod"); containerd's store and
// mounts give way to CRI-O's graph root, testdata/crio (its container file
// and layers), and the containers' overlays mounted at
// overlay/<layer>/merged. web-0 keeps its infrastructure container
// (drop_infra_ctr = false); the writer pod has none running.
func crioHostRoot(t *testing.T) string {
	t.Helper()
	root := copyTree(t, "testdata/v2-systemd")
	pod := filepath.Join(root, "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7d3f3c2a_9b1e_4c5d_8f6a_2b3c4d5e6f70.slice")
	for _, id := range []string{crioWebSandbox, crioWebApp, crioWebSidecar} {
		if err := os.Rename(filepath.Join(pod, "cri-containerd-"+id+".scope"), filepath.Join(pod, "crio-"+id+".scope")); err != nil {
			t.Fatal(err)
		}
		if id != crioWebSandbox {
			mkdirs(t, filepath.Join(pod, "crio-conmon-"+id+".scope"))
		}
	}
	removeAll(t, filepath.Join(root, "var/lib/containerd"))
	copyOver(t, "testdata/crio", root)
	// The writer's container starts with an empty upper directory.
	mkdirs(t, filepath.Join(root, crioStore, "overlay", crioWriterLayer, "diff"))

	mi := filepath.Join(root, "proc/1/mountinfo")
	b, err := os.ReadFile(mi)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if !strings.Contains(l, "/run/containerd/") {
			lines = append(lines, l)
		}
	}
	const ov = crioStore + "/overlay"
	for i, layer := range []string{crioWebSandboxLayer, crioWebAppLayer, crioWebSidecarLayer, crioWriterLayer} {
		lines = append(lines, strings.Join([]string{
			"5" + string(rune('0'+i)) + "0 22 0:" + string(rune('6'+i)) + "0 / " + ov + "/" + layer + "/merged rw,nodev,relatime - overlay overlay",
			"rw,lowerdir=" + ov + "/l/GVQ4K7BN7XJ8B7TFQ7XKWO886V,upperdir=" + ov + "/" + layer + "/diff,workdir=" + ov + "/" + layer + "/work,uuid=on",
		}, " "))
	}
	if err := os.WriteFile(mi, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// copyOver copies the files of the tree src into dst, over what is there.
func copyOver(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mkdirs(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

// dirUsage is what cadvisor's GetDirUsage reports for dir, written from its
// definition: the allocated blocks and the inodes of dir and everything in
// it on its filesystem, a hard-linked inode once.
func dirUsage(t testing.TB, dir string) DiskUsage {
	t.Helper()
	var u DiskUsage
	var root unix.Stat_t
	if err := unix.Lstat(dir, &root); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Dev != root.Dev {
			return filepath.SkipDir
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		u.Bytes += uint64(st.Blocks) * 512
		u.Inodes++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func addUsage(us ...DiskUsage) DiskUsage {
	var s DiskUsage
	for _, u := range us {
		s.Bytes += u.Bytes
		s.Inodes += u.Inodes
	}
	return s
}

func TestParseCRIOContainers(t *testing.T) {
	b, err := os.ReadFile("testdata/crio/var/lib/containers/storage/overlay-containers/volatile-containers.json")
	if err != nil {
		t.Fatal(err)
	}
	const file = "/var/lib/containers/storage/overlay-containers/volatile-containers.json"
	got := map[string]crioContainer{}
	if err := parseCRIOContainers(b, file, got); err != nil {
		t.Fatal(err)
	}
	want := map[string]crioContainer{
		crioWebSandbox:    {layer: crioWebSandboxLayer, sandbox: true, file: file},
		crioWebApp:        {layer: crioWebAppLayer, file: file},
		crioWebSidecar:    {layer: crioWebSidecarLayer, file: file},
		crioWriterSandbox: {layer: crioWriterSandboxLayer, sandbox: true, file: file},
		crioWriterApp:     {layer: crioWriterLayer, file: file},
	}
	if !maps.Equal(got, want) {
		t.Errorf("parseCRIOContainers = %+v\nwant %+v", got, want)
	}

	// Records that cannot be used are kept with the reason; records of no
	// CRI container are skipped; an empty file is an empty store.
	id := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, in, bad string
	}{
		{"layer outside the store", `[{"id":"` + id + `","layer":"../../../../etc","metadata":"{\"pod-id\":\"x\"}"}]`, `layer "../../../../etc" is not a layer ID`},
		{"no metadata", `[{"id":"` + id + `","layer":"` + id + `"}]`, "no metadata"},
		{"metadata not JSON", `[{"id":"` + id + `","layer":"` + id + `","metadata":"{pod-id"}]`, `metadata "{pod-id" is not a JSON object`},
		{"metadata of another tool", `[{"id":"` + id + `","layer":"` + id + `","metadata":"{\"image-name\":\"alpine\"}"}]`, "has no pod-id"},
	} {
		got := map[string]crioContainer{}
		if err := parseCRIOContainers([]byte(tc.in), file, got); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c, ok := got[id]; !ok || c.layer != "" || !strings.Contains(c.bad, tc.bad) || c.file != file {
			t.Errorf("%s: %+v; want no layer, the reason %q and the file", tc.name, c, tc.bad)
		}
	}
	for _, in := range []string{"", "[]", "null", `[{"id":"short","layer":"` + id + `"}]`} {
		got := map[string]crioContainer{}
		if err := parseCRIOContainers([]byte(in), file, got); err != nil || len(got) != 0 {
			t.Errorf("parseCRIOContainers(%q) = %v, %v; want nothing, no error", in, got, err)
		}
	}
	for _, in := range []string{`[{"id":`, `{"id":"x"}`, `[{"id":"` + id + `","layer":7}]`} {
		if err := parseCRIOContainers([]byte(in), file, map[string]crioContainer{}); err == nil {
			t.Errorf("parseCRIOContainers(%q) did not fail", in)
		}
	}
}

// TestCRIOWritableLayers: on a CRI-O node a pod's writable layer is each of
// its running containers' overlay/<layer>/diff in CRI-O's store, measured as
// the kubelet measures it there (cadvisor's GetDirUsage), once per container
// though conmon has a cgroup named for it too; the infrastructure
// container's layer is left out, as the kubelet leaves it out.
func TestCRIOWritableLayers(t *testing.T) {
	root := crioHostRoot(t)
	layer := func(id string) string { return filepath.Join(root, crioStore, "overlay", id, "diff") }
	// The sandbox's layer holds something, so that counting it would show.
	mkdirs(t, filepath.Join(layer(crioWebSandboxLayer), "dev"))
	if err := os.WriteFile(filepath.Join(layer(crioWebSandboxLayer), "dev/shm-probe"), []byte("pause"), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	o := newTestObserver(t, Options{HostRoot: root, ImageFsPath: crioStore}, zap.New(core))
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]DiskUsage{
		uidB:  addUsage(dirUsage(t, layer(crioWebAppLayer)), dirUsage(t, layer(crioWebSidecarLayer))),
		uidBE: dirUsage(t, layer(crioWriterLayer)),
		uidG:  {},
	}
	for i, p := range obs.Summary.Pods {
		x := obs.Pods[i].EphemeralParts
		if w, ok := want[p.PodRef.UID]; !ok || x == nil || x.WritableLayer != w {
			t.Errorf("pod %s: parts %+v; want the writable layer %+v", p.PodRef.UID, x, w)
		}
	}
	if want[uidB].Inodes != 10 {
		t.Errorf("web-0's layers have %d inodes; the fixture has 10 (app: diff, etc, nginx, conf.d, default.conf, tmp, scratch; sidecar: diff, etc, resolv.conf)", want[uidB].Inodes)
	}
	if logs.Len() != 0 {
		t.Errorf("warnings %v; want none", logs.All())
	}
}

// TestCRIOWritableLayerUnusable: bad or missing records in CRI-O's store
// leave the container's writable layer out with one warning naming the file,
// never guessed; the rest is still measured.
func TestCRIOWritableLayerUnusable(t *testing.T) {
	const file = crioStore + "/overlay-containers/volatile-containers.json"
	for _, tc := range []struct {
		name    string
		edit    func(s string) string // of the container file
		warning string
		// the other pod keeps its layer
		writerLayer, webLayer bool
	}{
		{"malformed file", func(s string) string { return s[:len(s)/2] }, "cannot read CRI-O's container file", false, false},
		{"a layer ID that is none", func(s string) string { return strings.Replace(s, crioWriterLayer, "../../etc", 1) }, "record is unusable", false, true},
		{"metadata that is not CRI-O's", func(s string) string {
			return strings.ReplaceAll(s, `\"pod-id\":\"`+crioWriterSandbox, `\"sandbox-id\":\"`+crioWriterSandbox)
		}, "record is unusable", false, true},
		{"a container not in the store", func(s string) string { return strings.Replace(s, crioWriterApp, strings.Repeat("0", 64), 1) }, "in neither of CRI-O's container files", false, true},
		{"the records in containers.json instead", nil, "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := crioHostRoot(t)
			p := filepath.Join(root, file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				err = os.WriteFile(p, []byte(tc.edit(string(b))), 0o600)
			} else {
				err = os.Rename(p, filepath.Join(filepath.Dir(p), "containers.json"))
			}
			if err != nil {
				t.Fatal(err)
			}
			mkdirs(t, filepath.Join(root, crioStore, "overlay", crioWriterLayer, "diff/tmp"))
			core, logs := observer.New(zapcore.WarnLevel)
			o := newTestObserver(t, Options{HostRoot: root, ImageFsPath: crioStore, EphemeralRefresh: time.Nanosecond}, zap.New(core))
			for range 2 {
				obs, err := o.Observe(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range obs.Summary.Pods {
					x := obs.Pods[i].EphemeralParts
					want := map[string]bool{uidB: tc.webLayer, uidBE: tc.writerLayer}[p.PodRef.UID]
					if x != nil && (x.WritableLayer.Inodes > 0) != want {
						t.Errorf("pod %s: writable layer %+v; want one: %v", p.PodRef.UID, x.WritableLayer, want)
					}
				}
			}
			if tc.warning == "" {
				if logs.Len() != 0 {
					t.Errorf("warnings %v; want none", logs.All())
				}
				return
			}
			w := logs.FilterMessageSnippet(tc.warning)
			if w.Len() != 1 || logs.Len() != 1 {
				t.Fatalf("warnings %v; want one saying %q", logs.All(), tc.warning)
			}
			named := false
			for _, f := range w.All()[0].Context {
				named = named || (f.Key == "file" && f.String == file) || (f.Key == "dir" && f.String == crioStore+"/overlay-containers")
			}
			if !named {
				t.Errorf("warning %+v does not name %s", w.All()[0], file)
			}
		})
	}
}
