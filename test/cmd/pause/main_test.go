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
	cmd := exec.Command(os.Args[0], args...)
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
		case <-time.After(10 * time.Second):
			t.Fatalf("pause did not exit after %v", sig)
		}
	}
}

func TestPauseSurvivesSIGCHLD(t *testing.T) {
	cmd, done := startPause(t)
	if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("pause ended on SIGCHLD: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pause ended with %v after SIGTERM; want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not exit after SIGTERM")
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
