// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRepoRootAndBinary(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if mod, err := moduleOf(filepath.Join(root, "go.mod")); err != nil || mod != modulePath {
		t.Fatalf("RepoRoot %s: module %q, %v", root, mod, err)
	}

	bins := t.TempDir()
	if err := os.WriteFile(filepath.Join(bins, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bins, "plain"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinDirEnv, bins)
	tests := []struct {
		name    string
		wantErr bool
	}{
		{"etcd", false},
		{"plain", true},   // not executable
		{"missing", true}, // not there
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Binary(tt.name)
			if tt.wantErr {
				if !errors.Is(err, ErrMissingBinary) || !strings.Contains(err.Error(), filepath.Join(bins, tt.name)) || !strings.Contains(err.Error(), "make build cluster-bins") {
					t.Fatalf("error %v: want ErrMissingBinary naming the path and the make target", err)
				}
				return
			}
			if err != nil || p != filepath.Join(bins, tt.name) {
				t.Fatalf("Binary = %q, %v", p, err)
			}
		})
	}

	t.Setenv(RepoRootEnv, bins)
	if got, err := RepoRoot(); err != nil || got != bins {
		t.Fatalf("RepoRoot with %s set = %q, %v", RepoRootEnv, got, err)
	}
}

func TestStartClusterMissingBinaries(t *testing.T) {
	_, err := StartCluster(t.Context(), Config{BinDir: t.TempDir()})
	if !errors.Is(err, ErrMissingBinary) {
		t.Fatalf("StartCluster without binaries: %v, want ErrMissingBinary", err)
	}
}

// TestKubeBinDir: the Kubernetes binaries come from EVICTD_KUBE_BIN_DIR when
// it is set (make e2e-node-smoke KUBE_VERSION=...), from EVICTD_BIN_DIR
// otherwise, and StartCluster looks for the control plane there.
func TestKubeBinDir(t *testing.T) {
	bins, kube := t.TempDir(), t.TempDir()
	t.Setenv(BinDirEnv, bins)
	t.Setenv(KubeBinDirEnv, "")
	if got, err := KubeBinDir(); err != nil || got != bins {
		t.Fatalf("KubeBinDir without %s = %q, %v; want %s", KubeBinDirEnv, got, err, bins)
	}
	t.Setenv(KubeBinDirEnv, kube)
	if got, err := KubeBinDir(); err != nil || got != kube {
		t.Fatalf("KubeBinDir with %s = %q, %v; want %s", KubeBinDirEnv, got, err, kube)
	}
	if got, err := BinDir(); err != nil || got != bins {
		t.Fatalf("BinDir with %s set = %q, %v; want %s still", KubeBinDirEnv, got, err, bins)
	}
	_, err := StartCluster(t.Context(), Config{})
	if !errors.Is(err, ErrMissingBinary) || !strings.Contains(err.Error(), filepath.Join(kube, "etcd")) {
		t.Fatalf("StartCluster with an empty %s: %v, want ErrMissingBinary naming %s", KubeBinDirEnv, err, filepath.Join(kube, "etcd"))
	}
}

func TestReadManifest(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		wantKinds []string
		wantErr   string
	}{
		{name: "documents and comments", yaml: "# head\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n# only a comment\n---\n\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: b, namespace: a}\n",
			wantKinds: []string{"Namespace", "ServiceAccount"}},
		{name: "no kind", yaml: "apiVersion: v1\nmetadata: {name: a}\n", wantErr: "document 1 has no kind"},
		{name: "not YAML", yaml: "apiVersion: v1\nkind: [\n", wantErr: "document 1"},
		{name: "second bad", yaml: "apiVersion: v1\nkind: Namespace\n---\n- a list\n", wantErr: "document 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := ReadManifest(p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), p) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, p, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
			}
			if strings.Join(kinds, ",") != strings.Join(tt.wantKinds, ",") {
				t.Fatalf("kinds %v, want %v", kinds, tt.wantKinds)
			}
		})
	}
	if _, err := ReadManifest(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file read without error")
	}
}

func TestDeployManifestIdentity(t *testing.T) {
	p, err := ManifestPath()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ReadManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	identity := map[string][]string{}
	for _, o := range objs {
		if IsIdentityObject(o) {
			identity[o.GetKind()] = append(identity[o.GetKind()], o.GetName())
		}
	}
	// The agent's own; the secure port's reviews (system:auth-delegator)
	// and its readers' roles, bound to no one; evictd cleanup's, for an
	// uninstall; the FlowSchema and its priority level.
	for k, want := range map[string][]string{
		"Namespace": {"evictd-system"}, "ServiceAccount": {"evictd", "evictd-cleanup"},
		"ClusterRole":        {"evictd", "evictd-explain-reader", "evictd-metrics-reader", "evictd-cleanup"},
		"ClusterRoleBinding": {"evictd", "evictd-auth-delegator", "evictd-cleanup"},
		// evictd's requests under API Priority and Fairness.
		"PriorityLevelConfiguration": {"evictd"}, "FlowSchema": {"evictd"},
	} {
		if got := identity[k]; !slices.Equal(got, want) {
			t.Errorf("%s: %v in %s, want %v", k, got, p, want)
		}
	}
}

func TestTailFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte("1\n2\n3\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n    int
		want string
	}{{2, "3\n4"}, {10, "1\n2\n3\n4"}}
	for _, tt := range tests {
		if got := TailFile(p, tt.n); got != tt.want {
			t.Errorf("TailFile(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := TailFile(p+".missing", 3); !strings.Contains(got, "cannot read") {
		t.Errorf("tail of a missing file = %q", got)
	}
}

// TestReadyTimeoutEnv: EVICTD_E2E_READY_TIMEOUT, for a slow machine, sets
// the cluster start's bound; a value that is no positive duration is an
// error naming it.
func TestReadyTimeoutEnv(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 3 * time.Minute, "12m": 12 * time.Minute} {
		t.Setenv(ReadyTimeoutEnv, v)
		if got, err := readyTimeout(); err != nil || got != want {
			t.Errorf("%s=%q: %v, %v; want %v", ReadyTimeoutEnv, v, got, err, want)
		}
	}
	for _, v := range []string{"ten", "-1m", "0s"} {
		t.Setenv(ReadyTimeoutEnv, v)
		if _, err := readyTimeout(); err == nil || !strings.Contains(err.Error(), `"`+v+`"`) {
			t.Errorf("%s=%q: error %v; want one naming the value", ReadyTimeoutEnv, v, err)
		}
	}
}
