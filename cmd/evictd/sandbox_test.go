// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// TestRunSandboxesItself runs `evictd run` as its own process and reads
// what the kernel says of each of its threads: under the default sandbox
// every thread has the same seccomp filters, one more than this test
// process has (evictd's own, put on every thread at once), and
// no_new_privs; the log names the sandbox and /metrics has
// evictd_sandbox_active{kind="seccomp"} 1. With --sandbox=none there is no
// filter of evictd's own, a warning says so and the gauge is 0.
// cmd/evictd/app/sandbox's TestFileHandleAttack proves what the filter
// refuses.
func TestRunSandboxesItself(t *testing.T) {
	own := threadSeccomp(t, "/proc/self/status")
	cgrouptest.Need(t, own.filters >= 0, "a kernel that shows Seccomp_filters in /proc/PID/status (Linux 5.9 or later)")
	for _, tc := range []struct {
		flag, level, msg string
		active           string
		filters          int
	}{
		{"", "info", "sandbox: seccomp filter in force: open_by_handle_at, name_to_handle_at refused", "1", own.filters + 1},
		{"--sandbox=none", "warn", "sandbox: none, turned off: open_by_handle_at, name_to_handle_at allowed, so CAP_DAC_READ_SEARCH can open any file of a mounted host filesystem by its handle", "0", own.filters},
	} {
		t.Run("sandbox "+tc.flag, func(t *testing.T) {
			started, logs, pid := startEvictd(t, nil, "--node-name=sandbox-test", "--lock-memory=false", tc.flag)
			line := logs.find(tc.msg)
			if line == nil {
				t.Fatalf("no log line %q; logs: %v", tc.msg, logs.lines())
			}
			if line["level"] != tc.level {
				t.Errorf("%q logged at %v, want %s", tc.msg, line["level"], tc.level)
			}
			tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
			if err != nil || len(tasks) < 2 {
				t.Fatalf("evictd's threads: %v, %v", tasks, err)
			}
			for _, task := range tasks {
				got := threadSeccomp(t, task)
				if got.filters != tc.filters {
					t.Errorf("%s: Seccomp_filters %d, want %d (this test process has %d)", task, got.filters, tc.filters, own.filters)
				}
				if tc.filters > own.filters && (got.mode != 2 || !got.noNewPrivs) {
					t.Errorf("%s: Seccomp %d, NoNewPrivs %v; want 2 (filter) and true", task, got.mode, got.noNewPrivs)
				}
			}
			code, body, err := httpGet("http://" + started["metricsAddress"].(string) + "/metrics")
			if err != nil || code != 200 {
				t.Fatalf("/metrics: %d, %v", code, err)
			}
			if want := "\nevictd_sandbox_active{kind=\"seccomp\"} " + tc.active + "\n"; !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
			}
		})
	}
}

// startEvictd starts `evictd run` as its own process, with env added to
// the test's environment, and an unreachable API server (it stays waiting
// for its informers), and returns its "evictd starting" line, its logs and
// its PID once that line is out; the process is stopped at the test's end.
func startEvictd(t *testing.T, env []string, extra ...string) (map[string]any, *syncBuffer, int) {
	t.Helper()
	args := []string{"run", "--kubeconfig=" + unreachableKubeconfig(t),
		"--metrics-bind-address=127.0.0.1:0", "--wakeup-sources=none", "--informer-sync-timeout=5m"}
	for _, e := range extra {
		if e != "" {
			args = append(args, e)
		}
	}
	logs := &syncBuffer{}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asEvictdEnv+"=1"), env...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("evictd did not exit 0 after SIGTERM: %v", err)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("evictd did not stop within 20s of SIGTERM")
		}
	})
	var started map[string]any
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Errorf("evictd exited early: %v", err)
		default:
		}
		started = logs.find("evictd starting")
		return started != nil, nil
	})
	if err != nil {
		t.Fatalf("%v; logs: %v", err, logs.lines())
	}
	return started, logs, cmd.Process.Pid
}

// seccompState is a thread's seccomp lines of /proc/PID/task/TID/status.
type seccompState struct {
	mode, filters int // filters -1: the kernel does not say
	noNewPrivs    bool
}

func threadSeccomp(t *testing.T, path string) seccompState {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := seccompState{filters: -1}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "Seccomp":
			_, _ = fmt.Sscan(v, &s.mode)
		case "Seccomp_filters":
			_, _ = fmt.Sscan(v, &s.filters)
		case "NoNewPrivs":
			s.noNewPrivs = v == "1"
		}
	}
	return s
}
