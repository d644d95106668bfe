// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseAuditEvictions(t *testing.T) {
	real, err := os.ReadFile("testdata/audit-evictions.log")
	if err != nil {
		t.Fatal(err)
	}
	// Variations of the real line: another resource, an earlier stage, a
	// refusal and a dry run.
	first := strings.SplitN(string(real), "\n", 2)[0]
	other := strings.Replace(first, `"subresource":"eviction"`, `"subresource":"status"`, 1)
	received := strings.Replace(first, `"stage":"ResponseComplete"`, `"stage":"RequestReceived"`, 1)
	refused := strings.Replace(strings.Replace(first, `"code":201`, `"code":429`, 1), "step-memcg-0", "step-memcg-9", -1)
	dry := strings.Replace(first, "/eviction", "/eviction?dryRun=All", 1)
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	const user = "system:serviceaccount:evictd-system:evictd"
	tests := []struct {
		name    string
		in      string
		want    []AuditedEviction
		wantErr string
	}{
		{
			name: "real audit log",
			in:   string(real),
			want: []AuditedEviction{
				{Namespace: "bench-npnm7", Name: "step-memcg-0", User: user, Code: 201,
					Received: at("2026-11-22T09:23:05.592127Z"), Completed: at("2026-11-22T09:23:05.606195Z")},
				{Namespace: "bench-npnm7", Name: "step-memcg-1", User: user, Code: 201,
					Received: at("2026-11-22T09:23:09.719649Z"), Completed: at("2026-11-22T09:23:09.732859Z")},
			},
		},
		{
			name: "other events are skipped, refusals and dry runs kept",
			in:   strings.Join([]string{other, received, "", refused, dry}, "\n"),
			want: []AuditedEviction{
				{Namespace: "bench-npnm7", Name: "step-memcg-9", User: user, Code: 429,
					Received: at("2026-11-22T09:23:05.592127Z"), Completed: at("2026-11-22T09:23:05.606195Z")},
				{Namespace: "bench-npnm7", Name: "step-memcg-0", User: user, Code: 201, DryRun: true,
					Received: at("2026-11-22T09:23:05.592127Z"), Completed: at("2026-11-22T09:23:05.606195Z")},
			},
		},
		{name: "not JSON names the line", in: first + "\n{oops\n", wantErr: "audit log line 2"},
		{name: "bad timestamp", in: strings.Replace(first, `"requestReceivedTimestamp":"2026-11-22T09:23:05.592127Z"`, `"requestReceivedTimestamp":"yesterday"`, 1),
			wantErr: `requestReceivedTimestamp "yesterday"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAuditEvictions(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d evictions %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("eviction %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestReadAuditEvictionsMissingFile(t *testing.T) {
	got, err := ReadAuditEvictions(filepath.Join(t.TempDir(), "none.log"))
	if err != nil || got != nil {
		t.Fatalf("= %v, %v; want no evictions and no error for a log not written yet", got, err)
	}
}

// The wrapper passes its arguments through and appends the audit flags,
// quoting paths with spaces and quotes. A fake "real" binary prints its
// argv, one per line.
func TestAuditBinDir(t *testing.T) {
	real := t.TempDir()
	fake := "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n"
	if err := os.WriteFile(filepath.Join(real, "kube-apiserver"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, ".cluster-stamp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "it's bins")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit log")
	if err := AuditBinDir(dir, real, logPath); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "etcd")); err != nil || target != filepath.Join(real, "etcd") {
		t.Errorf("etcd link = %q, %v; want a link to %s", target, err, filepath.Join(real, "etcd"))
	}
	if _, err := os.Lstat(filepath.Join(dir, ".cluster-stamp")); !os.IsNotExist(err) {
		t.Errorf("hidden files must not be linked: %v", err)
	}
	out, err := exec.Command(filepath.Join(dir, "kube-apiserver"), "--secure-port=1", "a b").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--secure-port=1", "a b",
		"--audit-policy-file=" + filepath.Join(dir, "audit-policy.yaml"),
		"--audit-log-path=" + logPath,
		"--audit-log-mode=blocking", "--audit-log-format=json", "--audit-log-maxbackup=1", "--audit-log-maxsize=100000"}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("wrapper ran the server with\n%q\nwant\n%q", got, want)
	}
	policy, err := os.ReadFile(filepath.Join(dir, "audit-policy.yaml"))
	if err != nil || !strings.Contains(string(policy), `resources: ["pods/eviction"]`) {
		t.Errorf("policy = %q, %v; want one that logs pods/eviction", policy, err)
	}
	if err := AuditBinDir(t.TempDir(), t.TempDir(), logPath); err == nil {
		t.Error("a binary directory without kube-apiserver must be an error")
	}

	// The scale benchmark's: every request, at Metadata level.
	all := t.TempDir()
	if err := RequestAuditBinDir(all, real, logPath); err != nil {
		t.Fatal(err)
	}
	policy, err = os.ReadFile(filepath.Join(all, "audit-policy.yaml"))
	if err != nil || !strings.Contains(string(policy), "- level: Metadata\n") || strings.Contains(string(policy), "resources:") {
		t.Errorf("request policy = %q, %v; want one rule logging everything at Metadata", policy, err)
	}
}
