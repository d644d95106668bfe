// SPDX-License-Identifier: Apache-2.0

package hostpaths

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// tree makes dirs (and a file in each of full) under a new host root.
func tree(t *testing.T, dirs []string, full []string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range full {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type got struct {
	path    string
	missing bool
}

func paths(ps []Problem) []got {
	var out []got
	for _, p := range ps {
		out = append(out, got{p.Path, p.Missing})
	}
	return out
}

func TestCheck(t *testing.T) {
	// A node as a kubeadm containerd node has it: nothing to say.
	healthy := []string{"var/lib/kubelet/pods", "var/log/pods", "var/lib/containerd"}
	for _, tc := range []struct {
		name                 string
		dirs, full           []string
		imageFs, containerFs string
		want                 []got
	}{
		{"healthy", nil, healthy, "/var/lib/containerd", "", nil},
		// k3s mounted with the default paths: the runtime made an empty
		// /var/lib/containerd, the real store is elsewhere.
		{"empty image store", []string{"var/lib/containerd"}, healthy[:2], "/var/lib/containerd", "", []got{{"/var/lib/containerd", false}}},
		// k0s without its preset: the kubelet root mounted is empty.
		{"kubelet root elsewhere", []string{"var/lib/kubelet"}, healthy[1:], "/var/lib/containerd", "", []got{{"/var/lib/kubelet/pods", true}}},
		{"nothing mounted", nil, nil, "/var/lib/containerd", "", []got{
			{"/var/lib/kubelet/pods", true}, {"/var/log/pods", true}, {"/var/lib/containerd", true}}},
		{"split store missing", nil, append(healthy[:2:2], "var/lib/containers/storage"), "/var/lib/containers/storage", "/var/lib/containers/layers",
			[]got{{"/var/lib/containers/layers", true}}},
		{"container fs same as image fs", nil, healthy, "/var/lib/containerd", "/var/lib/containerd/", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.dirs, tc.full)
			ps := Check(root, tc.imageFs, tc.containerFs)
			if g := paths(ps); !reflect.DeepEqual(g, tc.want) {
				t.Errorf("Check = %v; want %v", g, tc.want)
			}
			for _, p := range ps {
				if p.Loses == "" || p.Hint == "" {
					t.Errorf("%s: says neither what is lost nor how to fix it: %+v", p.Path, p)
				}
			}
		})
	}
}

// A file where a directory belongs counts as missing.
func TestCheckFileIsMissing(t *testing.T) {
	root := tree(t, nil, []string{"var/lib/kubelet/pods", "var/log/pods"})
	if err := os.MkdirAll(filepath.Join(root, "var/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/containerd"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g := paths(Check(root, "/var/lib/containerd", "")); !reflect.DeepEqual(g, []got{{"/var/lib/containerd", true}}) {
		t.Errorf("Check = %v", g)
	}
}
