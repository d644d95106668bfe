package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The observer's checked-in fixture host roots.
var fixtureRoot = filepath.Join("..", "..", "pkg", "pressure", "testdata")

const (
	uidG  = "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0" // Guaranteed, 100Mi working set
	uidB  = "7d3f3c2a-9b1e-4c5d-8f6a-2b3c4d5e6f70" // Burstable, 240Mi, default/web-0
	uidBE = "a9b8c7d6-e5f4-4321-9876-fedcba987654" // BestEffort, 0
)

func runObserve(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = dispatch(context.Background(), append([]string{"observe"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestObserveJSON(t *testing.T) {
	tests := []struct {
		layout, cgroupRoot string
		capacity           uint64
		psi                bool
	}{
		{"v1-cgroupfs", "", 8 << 30, false},
		{"v1-systemd", "", 8 << 30, false},
		{"hybrid", "", 8 << 30, true}, // the burstable pod has a cgroup2 directory with memory.pressure
		{"v2-systemd", "", 8 << 30, true},
		{"v2-cgroupfs", "/node-a", 4 << 30, true},
	}
	for _, tc := range tests {
		t.Run(tc.layout, func(t *testing.T) {
			args := []string{"--host-root", filepath.Join(fixtureRoot, tc.layout), "-o", "json"}
			if tc.cgroupRoot != "" {
				args = append(args, "--cgroup-root", tc.cgroupRoot)
			}
			code, out, errOut := runObserve(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			var s statsv1alpha1.Summary
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&s); err != nil {
				t.Fatalf("output is not a Summary: %v\n%s", err, out)
			}
			if !strings.Contains(out, "\n  \"node\": {") {
				t.Error("JSON is not indented")
			}
			m := s.Node.Memory
			if m == nil || m.AvailableBytes == nil || *m.AvailableBytes+*m.WorkingSetBytes != tc.capacity {
				t.Errorf("node memory %+v; want capacity %d", m, tc.capacity)
			}
			if len(s.Node.SystemContainers) != 1 || s.Node.SystemContainers[0].Name != "pods" {
				t.Errorf("system containers %+v; want pods", s.Node.SystemContainers)
			}
			if s.Node.Fs == nil || s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil || s.Node.Rlimit == nil {
				t.Errorf("node fs %+v runtime %+v rlimit %+v; want all", s.Node.Fs, s.Node.Runtime, s.Node.Rlimit)
			}
			byUID := map[string]statsv1alpha1.PodStats{}
			for _, p := range s.Pods {
				byUID[p.PodRef.UID] = p
			}
			b, ok := byUID[uidB]
			if len(s.Pods) != 3 || !ok {
				t.Fatalf("%d pods, burstable found %v; want 3", len(s.Pods), ok)
			}
			if b.PodRef.Namespace != "default" || b.PodRef.Name != "web-0" || *b.Memory.WorkingSetBytes != 240<<20 ||
				*b.ProcessStats.ProcessCount != 27 || b.EphemeralStorage == nil || *b.EphemeralStorage.InodesUsed != 4 {
				t.Errorf("burstable pod %+v", b)
			}
			if got := b.Memory.PSI != nil; got != tc.psi {
				t.Errorf("pod PSI present %v; want %v", got, tc.psi)
			}
		})
	}
}

func TestObserveTable(t *testing.T) {
	code, out, errOut := runObserve(t, "--host-root", filepath.Join(fixtureRoot, "v2-cgroupfs"), "--cgroup-root", "/node-a", "-o", "table")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	row := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(l)
			}
		}
		t.Fatalf("no line starting with %q in\n%s", prefix, out)
		return nil
	}
	// Node signals come first: the node is the 4Gi cgroup /node-a with 2.5Gi working set.
	if f := row("memory.available"); f[1] != "1.5Gi" || f[2] != "4.0Gi" {
		t.Errorf("memory.available row %q; want 1.5Gi of 4.0Gi", f)
	}
	if f := row("allocatableMemory.available"); f[1] != "3.3Gi" {
		t.Errorf("allocatableMemory.available row %q; want 3.3Gi (4Gi capacity minus 700Mi)", f)
	}
	if f := row("pid.available"); f[1] != "63020" || f[2] != "63432" {
		t.Errorf("pid.available row %q; want 63020 of 63432", f)
	}
	if f := row("psi.memory"); f[1] != "some" || f[2] != "avg10=1.25" {
		t.Errorf("psi.memory row %q", f)
	}
	// Then the pods, largest working set first.
	header := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "UID") {
			header = i
		}
	}
	if header < 0 || header > len(lines)-4 || header < 5 {
		t.Fatalf("pod table missing or before the node signals:\n%s", out)
	}
	wantRows := []struct{ uid, pod, qos, ws, procs string }{
		{uidB, "default/web-0", "Burstable", "240.0Mi", "27"},
		{uidG, "kube-system/coredns-7db6d8ff4d-x2v9k", "Guaranteed", "100.0Mi", "12"},
		{uidBE, "-", "BestEffort", "0B", "3"},
	}
	for i, w := range wantRows {
		f := strings.Fields(lines[header+1+i])
		if len(f) < 8 || f[0] != w.uid || f[1] != w.pod || f[2] != w.qos || f[3] != w.ws || f[5] != w.procs {
			t.Errorf("pod row %d: %q; want %+v", i, f, w)
		}
	}
	if !strings.Contains(lines[header+1], "some avg10=4.50") {
		t.Errorf("pod row without memory PSI: %q", lines[header+1])
	}
}

func TestObserveBadInput(t *testing.T) {
	v1 := filepath.Join(fixtureRoot, "v1-cgroupfs")
	tests := []struct {
		name    string
		args    []string
		mention string
	}{
		{"bad output", []string{"--host-root", v1, "-o", "yaml"}, `"yaml"`},
		{"unknown flag", []string{"--nope"}, "-nope"},
		{"missing flag value", []string{"--host-root"}, "host-root"},
		{"extra argument", []string{"--host-root", v1, "now"}, `"now"`},
		{"missing host root", []string{"--host-root", filepath.Join(t.TempDir(), "absent")}, "absent"},
		{"host root without cgroups", []string{"--host-root", t.TempDir()}, "meminfo"},
		{"relative cgroup root", []string{"--host-root", v1, "--cgroup-root", "node-a"}, `"node-a"`},
		{"missing cgroup root", []string{"--host-root", v1, "--cgroup-root", "/node-z"}, "/node-z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runObserve(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d; want %d", code, exitUsage)
			}
			if out != "" {
				t.Errorf("stdout %q; want nothing", out)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.mention) {
				t.Errorf("stderr %q; want one line naming %s", errOut, tc.mention)
			}
		})
	}
}

func TestObserveHelp(t *testing.T) {
	code, out, _ := runObserve(t, "--help")
	if code != exitOK || !strings.Contains(out, "--host-root") || !strings.Contains(out, "-cgroup-root") {
		t.Errorf("help: exit %d, %q", code, out)
	}
}

func TestFormatBytes(t *testing.T) {
	for in, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.0Ki", 240 << 20: "240.0Mi", 3 << 30: "3.0Gi", 1 << 62: "4096.0Pi"} {
		if got := formatBytes(in); got != want {
			t.Errorf("formatBytes(%d) = %q; want %q", in, got, want)
		}
	}
}

// TestObserveThisHost runs observe on the real host root, as make observe
// does: a host without a kubepods cgroup is zero pods, not an error.
func TestObserveThisHost(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not root: observe needs to read the host's cgroups as root")
		}
		t.Skip("observe of this host runs as root")
	}
	code, out, errOut := runObserve(t, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var s statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("output is not a Summary: %v", err)
	}
	m := s.Node.Memory
	if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil || *m.AvailableBytes == 0 || s.Node.Rlimit == nil || s.Node.Fs == nil {
		t.Errorf("node stats of this host incomplete: %+v", s.Node)
	}
	if s.Pods == nil {
		t.Error("pods is null; want a list (empty without kubepods)")
	}
	code, out, errOut = runObserve(t, "-o", "table")
	if code != exitOK || !strings.Contains(out, "memory.available") || !strings.Contains(out, "PODS (") {
		t.Errorf("table: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
