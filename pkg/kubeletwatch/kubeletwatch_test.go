// SPDX-License-Identifier: Apache-2.0

package kubeletwatch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

// startProc runs a copy of sleep named name (so that its command line's
// argv[0] and its stat's command name are name's) and returns its PID; the
// process is killed at the end of the test, or by stop.
func startProc(t *testing.T, name string) (pid int, stop func()) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("sleep: %v", err)
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	// Start returns once the exec has begun, but the kernel sets the new
	// command line up a moment later: until then /proc/PID/cmdline reads
	// empty and the process is no kubelet yet (seen under emulation).
	cmdline := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cmdline")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(cmdline)
		if err == nil && bytes.HasPrefix(b, []byte(bin+"\x00")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still reads %q (%v) 10s after the exec of %s", cmdline, b, err, bin)
		}
	}
	return cmd.Process.Pid, stop
}

// procOf is a /proc holding only the real /proc entries of pids, so that
// a kubelet elsewhere on the machine does not count.
func procOf(t *testing.T, dir string, pids ...int) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		if err := os.Symlink("/proc/"+strconv.Itoa(p), filepath.Join(dir, strconv.Itoa(p))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestWatcherRealProcesses: a kubelet found, unchanged while it lives
// (another process beside it is no kubelet), changed when it is replaced
// by another, and changed to none when it is gone.
func TestWatcherRealProcesses(t *testing.T) {
	other, _ := startProc(t, "containerd")
	first, stopFirst := startProc(t, "kubelet")
	proc := procOf(t, filepath.Join(t.TempDir(), "proc"), other, first)

	p, err := Find(proc, nil)
	if err != nil || p.PID != first || p.Start == 0 {
		t.Fatalf("Find = %v, %v; want pid %d with its start time", p, err, first)
	}
	w := New(proc, p)
	if ch, now, err := w.Check(); ch || now != p || err != nil {
		t.Errorf("the same kubelet: changed %v, now %v, err %v", ch, now, err)
	}

	stopFirst()
	second, _ := startProc(t, "kubelet")
	if err := os.Symlink("/proc/"+strconv.Itoa(second), filepath.Join(proc, strconv.Itoa(second))); err != nil {
		t.Fatal(err)
	}
	ch, now, err := w.Check()
	if !ch || now.PID != second || err != nil {
		t.Errorf("a new kubelet: changed %v, now %v, err %v; want pid %d", ch, now, err, second)
	}
	if ch, _, _ := w.Check(); ch {
		t.Error("the new kubelet checked again: changed")
	}
	if err := os.Remove(filepath.Join(proc, strconv.Itoa(second))); err != nil {
		t.Fatal(err)
	}
	if ch, now, err := w.Check(); !ch || !now.IsZero() || err != nil {
		t.Errorf("no kubelet left: changed %v, now %v, err %v", ch, now, err)
	}
	if ch, _, _ := w.Check(); ch {
		t.Error("still no kubelet: changed")
	}
}

// TestWatcherSamePIDAnotherStart: a kubelet under the PID the last one had
// but with another start time is another process. The kernel will not hand
// a test a PID again on demand: the stat is a real one, copied, with its
// start time moved.
func TestWatcherSamePIDAnotherStart(t *testing.T) {
	pid, _ := startProc(t, "kubelet")
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	proc := t.TempDir()
	dir := filepath.Join(proc, strconv.Itoa(pid))
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cmdline", cmdline)
	write("stat", stat)
	write("cgroup", []byte("0::/system.slice/kubelet.service\n"))
	p, err := Find(proc, nil)
	if err != nil || p.PID != pid {
		t.Fatalf("Find = %v, %v", p, err)
	}
	w := New(proc, p)
	if ch, _, _ := w.Check(); ch {
		t.Fatal("the same stat: changed")
	}
	later := withStartTime(t, stat, p.Start+500)
	write("stat", later)
	ch, now, err := w.Check()
	if !ch || now.PID != pid || now.Start != p.Start+500 || err != nil {
		t.Errorf("same pid, start %d then %d: changed %v, now %v, err %v", p.Start, p.Start+500, ch, now, err)
	}
}

// withStartTime is stat with field 22 set to start.
func withStartTime(t *testing.T, stat []byte, start uint64) []byte {
	t.Helper()
	s := string(stat)
	end := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[end+1:])
	fields[22-3] = strconv.FormatUint(start, 10)
	return []byte(s[:end+1] + " " + strings.Join(fields, " ") + "\n")
}

// TestParseStartTime: the command name may hold spaces and parentheses
// (a real process's, named so), and a bad line is one error naming it.
func TestParseStartTime(t *testing.T) {
	pid, _ := startProc(t, "ku (be) let")
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stat), "(ku (be) let)") {
		t.Fatalf("stat %q: want the command name with its parentheses", stat)
	}
	got, err := ParseStartTime(stat)
	if err != nil {
		t.Fatal(err)
	}
	// The same field counted another way: from the end of the 52 fields
	// Linux has written since 3.5.
	if fields := strings.Fields(string(stat)); len(fields) >= 52 {
		want, _ := strconv.ParseUint(fields[len(fields)-52+21], 10, 64)
		if got != want {
			t.Errorf("start time %d, want %d (stat %q)", got, want, stat)
		}
	}
	for _, c := range []struct{ in, err string }{
		{"123 kubelet S 1", "no command name"},
		{"123 (kubelet) S 1 2 3", "4 fields after the command name, want at least 20"},
		{"1 (k) S 1 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 x 1", `start time "x"`},
	} {
		if _, err := ParseStartTime([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %v, want %q", c.in, err, c.err)
		}
	}
}

// TestWatcherRun: Run checks on its ticker only, tells the change with the
// process before and after, and ends with ctx.
func TestWatcherRun(t *testing.T) {
	first, stopFirst := startProc(t, "kubelet")
	proc := procOf(t, filepath.Join(t.TempDir(), "proc"), first)
	p, err := Find(proc, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(time.Unix(1e9, 0))
	w := New(proc, p)
	type change struct{ prev, now Process }
	changes := make(chan change, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, clk, 10*time.Second, func(prev, now Process, changed bool) {
			if changed {
				changes <- change{prev, now}
			}
		}, func(err error) { t.Errorf("check: %v", err) })
	}()
	stopFirst()
	second, _ := startProc(t, "kubelet")
	if err := os.Symlink("/proc/"+strconv.Itoa(second), filepath.Join(proc, strconv.Itoa(second))); err != nil {
		t.Fatal(err)
	}
	// The ticker is armed once Run waits on it.
	deadline := time.Now().Add(30 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Run never waited on its ticker")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(10 * time.Second)
	select {
	case c := <-changes:
		if c.prev != p || c.now.PID != second {
			t.Errorf("change %v -> %v, want %v -> pid %d", c.prev, c.now, p, second)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no change reported after a tick")
	}
	cancel()
	<-done
}
