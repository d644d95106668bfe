// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainerdConfigAsContainerdReadsIt: the node's containerd config,
// read by the containerd the node runs (hack/build-node.sh) with its own
// `config dump`, lands in the plugins the CRI reads, with nothing migrated.
// containerd ignores keys it does not know, so a key under an old plugin
// name (containerd 1.x's io.containerd.grpc.v1.cri.containerd) would leave
// the default in place without a word; the dump shows what it really uses.
func TestContainerdConfigAsContainerdReadsIt(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "_output", "bin", "containerd")
	if !isFile(bin) {
		t.Fatalf("missing %s: make node-bins", bin)
	}
	for _, systemd := range []bool{false, true} {
		t.Run(fmt.Sprintf("SystemdCgroup=%t", systemd), func(t *testing.T) {
			checkContainerdConfig(t, bin, systemd)
		})
	}
}

func checkContainerdConfig(t *testing.T, bin string, systemd bool) {
	const pause = "docker.io/library/evictd-pause:e2e-node"
	cfg := filepath.Join(t.TempDir(), "containerd.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig("/rt", "/out", pause, systemd)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--config", cfg, "config", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("containerd config dump: %v\n%s", err, out)
	}
	dump := string(out)
	if strings.Contains(dump, "migrated") {
		t.Errorf("containerd migrated the config (an old version):\n%s", firstLine(dump))
	}
	// Each setting, under the plugin table it must be in.
	want := map[string][]string{
		"[plugins.'io.containerd.cri.v1.images']":                                   {"snapshotter = 'overlayfs'"},
		"[plugins.'io.containerd.cri.v1.images'.pinned_images]":                     {"sandbox = '" + pause + "'"},
		"[plugins.'io.containerd.cri.v1.runtime']":                                  {"disable_apparmor = true", "enable_selinux = false"},
		"[plugins.'io.containerd.cri.v1.runtime'.containerd]":                       {"default_runtime_name = 'runc'"},
		"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]":         {"runtime_type = 'io.containerd.runc.v2'"},
		"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]": {"BinaryName = '/rt/usr/sbin/runc'", fmt.Sprintf("SystemdCgroup = %t", systemd)},
		"[plugins.'io.containerd.cri.v1.runtime'.cni]":                              {"bin_dirs = ['/rt/usr/lib/cni']", "conf_dir = '/out/cni'"},
		"[plugins.'io.containerd.server.v1.grpc']":                                  {"address = '/run/containerd/containerd.sock'"},
	}
	tables := dumpTables(dump)
	for table, lines := range want {
		got, ok := tables[table]
		if !ok {
			t.Errorf("containerd config dump has no table %s", table)
			continue
		}
		for _, l := range lines {
			if !got[l] {
				t.Errorf("table %s: no line %q in containerd's dump", table, l)
			}
		}
	}
	if !strings.Contains(dump, "root = '/var/lib/containerd'") || !strings.Contains(dump, "state = '/run/containerd'") {
		t.Errorf("root or state moved from /var/lib/containerd and /run/containerd (evictd's image store and the rootfs mounts)")
	}
}

// dumpTables splits a TOML dump into its tables' own key lines (trimmed).
func dumpTables(dump string) map[string]map[string]bool {
	tables := map[string]map[string]bool{}
	cur := ""
	for _, l := range strings.Split(dump, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			cur = l
			if tables[cur] == nil {
				tables[cur] = map[string]bool{}
			}
			continue
		}
		if cur != "" && l != "" {
			tables[cur][l] = true
		}
	}
	return tables
}
