// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestWarnHostPaths: a host root whose kubelet root and image store were
// mounted from the wrong place (an empty directory the runtime made, as
// with an unchecked hostPath) gives one warning per directory, naming it;
// a complete one gives none.
func TestWarnHostPaths(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"var/lib/kubelet", "var/log/pods/ns_pod_uid", "var/lib/containerd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zapcore.WarnLevel)
	warnHostPaths(zap.New(core), root, "/var/lib/containerd", "")
	var paths []string
	for _, e := range logs.All() {
		paths = append(paths, e.ContextMap()["path"].(string))
		if e.Message != "host directory missing or empty: check the host paths evictd is given" {
			t.Errorf("message %q; docs/run.md lists it as stable", e.Message)
		}
		if e.ContextMap()["fix"] == "" || e.ContextMap()["unmeasured"] == "" {
			t.Errorf("warning %q %v says neither what is lost nor how to fix it", e.Message, e.ContextMap())
		}
	}
	if states := []any{logs.All()[0].ContextMap()["state"], logs.All()[len(logs.All())-1].ContextMap()["state"]}; states[0] != "missing" || states[1] != "empty" {
		t.Errorf("states %v; want missing (no pods directory), empty (the image store)", states)
	}
	if want := []string{"/var/lib/kubelet/pods", "/var/lib/containerd"}; len(paths) != 2 || paths[0] != want[0] || paths[1] != want[1] {
		t.Errorf("warnings for %v; want %v", paths, want)
	}

	for _, d := range []string{"var/lib/kubelet/pods/uid", "var/lib/containerd/io.containerd.content.v1.content"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	core, logs = observer.New(zapcore.WarnLevel)
	warnHostPaths(zap.New(core), root, "/var/lib/containerd", "")
	if logs.Len() != 0 {
		t.Errorf("warnings on a complete host root: %v", logs.All())
	}
}
