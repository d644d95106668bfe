// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startVMAgent builds test/cmd/vmagent as the guest gets it, serves it on a
// free loopback port and returns a client of it. The agent runs on the host
// here, so guest paths in requests are host paths.
func startVMAgent(t *testing.T) *Agent {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "vmagent")
	build := exec.Command("go", "build", "-o", bin, "../cmd/vmagent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build vmagent: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "serve", "--listen=127.0.0.1:0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("vmagent's stderr:\n%s", stderr.String())
		}
	})

	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	var first string
	select {
	case first = <-line:
	case <-time.After(time.Minute):
		t.Fatal("vmagent serve printed nothing within a minute")
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(first), "listening on ")
	if !ok {
		t.Fatalf("vmagent serve's first line %q; want \"listening on ADDR\"", first)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return NewAgent(p)
}

func TestAgentAgainstVMAgent(t *testing.T) {
	agent := startVMAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := agent.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("exec reports output and exit code", func(t *testing.T) {
		argv := []string{"sh", "-c", "echo hi; echo err >&2; exit 3"}
		res, err := agent.Exec(ctx, argv)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 3 || res.Stdout != "hi\n" || res.Stderr != "err\n" || res.Seconds <= 0 {
			t.Fatalf("result %+v; want exit 3, stdout \"hi\\n\", stderr \"err\\n\"", res)
		}
		msg := res.Err().Error()
		for _, want := range []string{`"sh" "-c"`, "exit code 3", "stderr: err"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Err() = %q; want it to contain %q", msg, want)
			}
		}
	})

	t.Run("exec options", func(t *testing.T) {
		res, err := agent.Exec(ctx, []string{"sh", "-c", `cat; echo "$A $B"`},
			WithStdin("input\n"), WithEnv("A=1"), WithEnv("B=2"), WithTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "input\n1 2\n" || res.Err() != nil {
			t.Fatalf("result %+v, Err %v; want stdout \"input\\n1 2\\n\" and no error", res, res.Err())
		}
	})

	t.Run("exec timeout is an error with the partial output", func(t *testing.T) {
		res, err := agent.Exec(ctx, []string{"sh", "-c", "echo before; sleep 30"}, WithTimeout(300*time.Millisecond))
		if err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("err = %v; want a timeout", err)
		}
		if res == nil || res.ExitCode != -1 || res.Stdout != "before\n" {
			t.Fatalf("result %+v; want exit code -1 and the output so far", res)
		}
	})

	t.Run("exec of a missing command is an error", func(t *testing.T) {
		_, err := agent.Exec(ctx, []string{"/nonexistent/guest-command"})
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/guest-command") {
			t.Fatalf("err = %v; want one naming the command", err)
		}
	})

	t.Run("a refused request is an error with the agent's message", func(t *testing.T) {
		_, err := agent.Exec(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "400 Bad Request") || !strings.Contains(err.Error(), "argv is empty") {
			t.Fatalf("err = %v; want the agent's 400 and its reason", err)
		}
		if err := agent.Signal(ctx, 1, "STOP"); err == nil || !strings.Contains(err.Error(), `unknown signal "STOP"`) {
			t.Fatalf("Signal STOP: %v; want the agent's refusal", err)
		}
	})

	t.Run("spawn and signal a daemon", func(t *testing.T) {
		logPath := filepath.Join(t.TempDir(), "daemon.log")
		pid, err := agent.Spawn(ctx, []string{"sh", "-c", `trap 'echo "got TERM"; exit 0' TERM; echo "started $MODE"; while :; do sleep 0.05; done`},
			logPath, "MODE=test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { agent.Signal(context.Background(), pid, "KILL") })
		waitForFile(t, logPath, "started test\n")
		if err := agent.Signal(ctx, pid, "TERM"); err != nil {
			t.Fatal(err)
		}
		waitForFile(t, logPath, "started test\ngot TERM\n")
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := agent.Signal(ctx, pid, "KILL")
			if err != nil && strings.Contains(err.Error(), "already ended") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Signal to the ended daemon: %v; want an error saying it ended", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// waitForFile waits until the file at path holds want.
func waitForFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		if string(data) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q, want %q", path, data, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWaitReadyPollsUntilHealthy(t *testing.T) {
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if probes.Add(1) < 3 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	agent := &Agent{URL: srv.URL, HTTP: srv.Client()}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := agent.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if n := probes.Load(); n != 3 {
		t.Fatalf("%d probes; want 3 (two failures, then ok)", n)
	}
	if elapsed := time.Since(start); elapsed < 2*readyPollInterval {
		t.Fatalf("ready after %v; want two poll intervals between three probes", elapsed)
	}
}

func TestWaitReadyReturnsTheLastErrorWhenTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens: every probe is refused

	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	err = NewAgent(port).WaitReady(ctx)
	if err == nil {
		t.Fatal("WaitReady succeeded with nothing listening")
	}
	for _, want := range []string{"connection refused", "deadline exceeded", "127.0.0.1:" + strconv.Itoa(port)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("WaitReady: %v; want it to contain %q", err, want)
		}
	}
}

func TestExecResultErrQuotesTheEndOfStderr(t *testing.T) {
	if err := (&ExecResult{ExitCode: 0, Stderr: "warnings"}).Err(); err != nil {
		t.Fatalf("Err() of exit 0 = %v, want nil", err)
	}
	long := strings.Repeat("x", 10000) + "the real reason"
	err := (&ExecResult{ExitCode: 1, Stderr: long + "\n", argv: []string{"kubectl", "apply"}}).Err()
	if err == nil {
		t.Fatal("Err() of exit 1 = nil")
	}
	msg := err.Error()
	if !strings.HasSuffix(msg, "the real reason") || !strings.Contains(msg, `["kubectl" "apply"]: exit code 1`) || len(msg) > stderrTailBytes+200 {
		t.Fatalf("Err() = %.200q... (%d bytes); want the command, the exit code and at most the last %d bytes of stderr", msg, len(msg), stderrTailBytes)
	}
}
