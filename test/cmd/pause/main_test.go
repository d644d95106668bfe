// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runAsPauseEnv makes the test binary run pause's main instead of the tests,
// so that a test can run pause as a process of its own.
const runAsPauseEnv = "PAUSE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsPauseEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// startPause runs pause with args and waits until it says it is waiting,
// which it does once its signal handlers are in place.
func startPause(t *testing.T, args ...string) (*exec.Cmd, <-chan error) {
	t.Helper()
	return startPauseCmd(t, exec.Command(os.Args[0], args...))
}

// startPauseCmd is startPause for a command that ends up exec'ing pause.
func startPauseCmd(t *testing.T, cmd *exec.Cmd) (*exec.Cmd, <-chan error) {
	t.Helper()
	cmd.Env = append(os.Environ(), runAsPauseEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || line != "pause: waiting for SIGINT or SIGTERM\n" {
		t.Fatalf("pause's first line %q, %v; want it waiting", line, err)
	}
	go io.Copy(io.Discard, stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

func TestPauseExitsZeroOnSIGTERMAndSIGINT(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		// Unknown arguments are ignored, as the real pause does.
		cmd, done := startPause(t, "--unknown", "arg")
		select {
		case err := <-done:
			t.Fatalf("pause exited before any signal: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("after %v pause ended with %v; want exit 0", sig, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("pause did not exit after %v", sig)
		}
	}
}

// A SIGCHLD, sent by hand or by an ending child, only makes pause reap.
// pause starts with two children (a shell forks them and execs pause);
// each one killed must be reaped while pause still runs. Had pause ended
// on the SIGCHLD sent by hand, or on the first child's, the second child
// would be orphaned by an exited pause: the kernel marks pause a zombie
// before it re-parents the child, so pause is seen dead once that child is
// gone.
func TestPauseSurvivesSIGCHLD(t *testing.T) {
	cmd, done := startPauseCmd(t, exec.Command("sh", "-c", `sleep 600 & sleep 600 & exec "$0"`, os.Args[0]))
	pid := cmd.Process.Pid
	children := pauseChildren(t, pid)
	if len(children) != 2 {
		t.Fatalf("pause's children %v, want the two sleeps", children)
	}
	t.Cleanup(func() {
		for _, c := range children {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	})
	if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		if err := syscall.Kill(c, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c)
		select {
		case err := <-done:
			t.Fatalf("pause ended on SIGCHLD: %v", err)
		default:
		}
		if st := procState(t, pid); st == "Z" || st == "" {
			t.Fatalf("pause ended on SIGCHLD (state %q once child %d was gone)", st, c)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pause ended with %v after SIGTERM; want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pause did not exit after SIGTERM")
	}
}

// pauseChildren lists pid's children.
func pauseChildren(t *testing.T, pid int) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
	if err != nil {
		t.Skipf("no /proc children list: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		c, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, c)
	}
	return pids
}

// procState is pid's state letter, "" once it is gone.
func procState(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	// The state follows the command name, which ends at the last ')'.
	return strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))[0]
}

// waitGone waits until pid is reaped, generously for a loaded machine.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for procState(t, pid) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d was never reaped (state %s)", pid, procState(t, pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPauseVersion(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-v")
	cmd.Env = append(os.Environ(), runAsPauseEnv+"=1")
	out, err := cmd.Output()
	if err != nil || string(out) != version+"\n" {
		t.Fatalf("pause -v: %q, %v; want %q and exit 0", out, err, version+"\n")
	}
}

func TestReapZombiesWaitsForEndedChildren(t *testing.T) {
	// This test process stands in for PID 1: its own children end and
	// stay zombies until someone waits for them.
	var pids []int
	for range 3 {
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, cmd.Process.Pid)
	}
	for _, pid := range pids {
		waitForState(t, pid, "Z")
	}
	reaped := reapZombies()
	for _, pid := range pids {
		if !slices.Contains(reaped, pid) {
			t.Errorf("reapZombies() = %v; want it to include %d", reaped, pid)
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pid %d still exists after reaping (%v)", pid, err)
		}
	}
	if again := reapZombies(); len(again) != 0 {
		t.Fatalf("second reapZombies() = %v; want none left", again)
	}
}

func waitForState(t *testing.T, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command name, which ends at the last ')'.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if fields[0] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is in state %s, want %s", pid, fields[0], want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
