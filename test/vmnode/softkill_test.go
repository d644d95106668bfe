// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKillOnLineScript runs the guest's script on the host against a log
// that gains the line after the script started, with a process of its own
// named evictd: it kills that process only then, and says when.
func TestKillOnLineScript(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	old := `2026-11-28T19:00:00.1Z stderr F {"msg":"threshold met","signal":"memory.available"}` + "\n"
	if err := os.WriteFile(log, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	// A process of a name of its own (never evictd: the e2e tests beside
	// this one run evictd processes): a copy of sleep under that name.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("this test copies sleep(1) under a name of its own: %v", err)
	}
	name := "killtest" + strconv.Itoa(os.Getpid()%10000)
	bin := filepath.Join(dir, name)
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := exec.Command(bin, "300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- victim.Wait() }()
	t.Cleanup(func() { _ = victim.Process.Kill() })

	argv := killOnLineArgv(log, `"msg":"threshold met"`, `"signal":"memory.available"`, time.Minute, name)
	script := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	script.Stdout = &out
	if err := script.Start(); err != nil {
		t.Fatal(err)
	}
	// The line it started with does not count; a new one for another
	// signal neither.
	time.Sleep(time.Second)
	appendLine := func(line string) {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	appendLine(`2026-11-28T19:00:01.1Z stderr F {"msg":"threshold met","signal":"nodefs.available"}`)
	select {
	case err := <-waited:
		t.Fatalf("evictd killed before its line: %v (script: %q)", err, out.String())
	case <-time.After(time.Second):
	}
	before := time.Now()
	appendLine(`2026-11-28T19:00:02.1Z stderr F {"msg":"threshold met","signal":"memory.available"}`)
	if err := script.Wait(); err != nil {
		t.Fatalf("the script: %v (%q)", err, out.String())
	}
	pids, at, err := parseKilled(out.String())
	t.Logf("the script: %q", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, strconv.Itoa(victim.Process.Pid)) {
		t.Errorf("killed %v, want %d among them", pids, victim.Process.Pid)
	}
	if at.Before(before.Add(-time.Second)) {
		t.Errorf("killed at %s, before the line was written (%s)", at, before)
	}
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("the process named evictd still runs")
	}
}

// TestKillOnLineScriptNotSeen: no new line within its time: it says so and
// fails, killing nothing.
func TestKillOnLineScriptNotSeen(t *testing.T) {
	log := filepath.Join(t.TempDir(), "0.log")
	argv := killOnLineArgv(log, "a", "b", time.Second, "killtest-none")
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err == nil || strings.TrimSpace(string(out)) != "not seen" {
		t.Fatalf("got %q, %v; want \"not seen\" and an exit status", out, err)
	}
	if _, _, err := parseKilled(string(out)); err == nil || !strings.Contains(err.Error(), "not seen") {
		t.Errorf("parseKilled(%q): %v, want an error quoting it", out, err)
	}
}

func TestParseKilled(t *testing.T) {
	pids, at, err := parseKilled("killed 123 456 at 2026-11-28T19:07:19.715343210Z\n")
	if err != nil || !slices.Equal(pids, []string{"123", "456"}) || at.Nanosecond() != 715343210 {
		t.Fatalf("got %v %s %v", pids, at, err)
	}
	if _, _, err := parseKilled("killed 1 at yesterday"); err == nil || !strings.Contains(err.Error(), "yesterday") {
		t.Errorf("a bad time: %v", err)
	}
}
