// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/evictd/evictd/test/vmnode/vmapi"

	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newTestServer serves the agent's API on loopback; its log goes to t.Log.
func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(newHandler(log.New(testLogWriter{t}, "vmagent: ", 0)))
	t.Cleanup(srv.Close)
	return srv
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// post sends body to path and returns the status and the response body.
func post(t *testing.T, srv *httptest.Server, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read body: %v", path, err)
	}
	return resp.StatusCode, string(data)
}

// postJSON sends req as JSON, expects 200 and decodes the answer into resp.
func postJSON(t *testing.T, srv *httptest.Server, path string, req, resp any) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	status, data := post(t, srv, path, string(body))
	if status != http.StatusOK {
		t.Fatalf("POST %s %s: status %d, body %q", path, body, status, data)
	}
	if err := json.Unmarshal([]byte(data), resp); err != nil {
		t.Fatalf("POST %s: decode %q: %v", path, data, err)
	}
}

func TestHealthz(t *testing.T) {
	srv := newTestServer(t)
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("GET /healthz: status %d, body %q; want 200 \"ok\"", resp.StatusCode, body)
	}
	if status, _ := post(t, srv, "/healthz", ""); status != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz: status %d, want 405", status)
	}
}

func TestExecReportsOutputAndExitCode(t *testing.T) {
	srv := newTestServer(t)
	var got vmapi.ExecResponse
	postJSON(t, srv, "/exec", vmapi.ExecRequest{Argv: []string{"sh", "-c", "echo hi; echo err >&2; exit 3"}}, &got)
	if got.ExitCode != 3 || got.Stdout != "hi\n" || got.Stderr != "err\n" || got.Error != "" {
		t.Fatalf("got %+v; want exit 3, stdout \"hi\\n\", stderr \"err\\n\", no error", got)
	}
	if got.Seconds <= 0 || got.Seconds > 30 {
		t.Fatalf("seconds = %v, want a small positive duration", got.Seconds)
	}
}

func TestExecPassesStdinAndEnv(t *testing.T) {
	srv := newTestServer(t)
	var got vmapi.ExecResponse
	postJSON(t, srv, "/exec", vmapi.ExecRequest{
		Argv:  []string{"sh", "-c", `cat; printf '%s,%s' "$GREETING" "$HOME"`},
		Stdin: "from stdin\n",
		Env:   []string{"GREETING=hello"},
	}, &got)
	// HOME comes from the agent's own environment, which env extends.
	want := "from stdin\nhello," + os.Getenv("HOME")
	if got.ExitCode != 0 || got.Stdout != want {
		t.Fatalf("got %+v; want exit 0 and stdout %q", got, want)
	}
}

func TestExecReportsDeathBySignalAsShellWould(t *testing.T) {
	srv := newTestServer(t)
	var got vmapi.ExecResponse
	postJSON(t, srv, "/exec", vmapi.ExecRequest{Argv: []string{"sh", "-c", "kill -KILL $$"}}, &got)
	if got.ExitCode != 128+9 || got.Error != "" {
		t.Fatalf("got %+v; want exit code 137 and no error", got)
	}
}

func TestExecCommandThatCannotStart(t *testing.T) {
	srv := newTestServer(t)
	var got vmapi.ExecResponse
	postJSON(t, srv, "/exec", vmapi.ExecRequest{Argv: []string{"/nonexistent/vmagent-test-command"}}, &got)
	if got.ExitCode != -1 || !strings.Contains(got.Error, "/nonexistent/vmagent-test-command") {
		t.Fatalf("got %+v; want exit code -1 and an error naming the command", got)
	}
}

func TestExecTimeoutKillsTheProcessGroup(t *testing.T) {
	srv := newTestServer(t)
	var got vmapi.ExecResponse
	// The shell prints its background child's pid and waits for it; the
	// child holds the stdout pipe, so only a group kill ends this early.
	postJSON(t, srv, "/exec", vmapi.ExecRequest{
		Argv:           []string{"sh", "-c", "sleep 60 & echo $!; wait"},
		TimeoutSeconds: 0.5,
	}, &got)
	if got.ExitCode != -1 || !strings.Contains(got.Error, "timed out") {
		t.Fatalf("got %+v; want exit code -1 and a timeout error", got)
	}
	// Half the child's 60 s: had the kill missed the group, the child's
	// pipe would have held the call for all of them.
	if got.Seconds > 30 {
		t.Fatalf("took %.1fs; the timeout was 0.5s, the child sleeps 60s", got.Seconds)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(got.Stdout))
	if err != nil {
		t.Fatalf("stdout %q is not the background sleep's pid", got.Stdout)
	}
	waitGone(t, pid)
}

// waitGone waits until pid has died (gone, or a zombie its new parent has not
// reaped yet). A process reaped between the open of its stat file and the
// read fails the read with ESRCH rather than ENOENT: gone too.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		state, err := procState(pid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) || state == "Z" {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is still alive (state %s)", pid, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procStat is /proc/PID/stat's fields after the command name: state is [0],
// the session id [3].
func procStat(pid int) ([]string, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	// The command name may hold spaces and parentheses; it ends at the last ')'.
	i := bytes.LastIndexByte(data, ')')
	return strings.Fields(string(data[i+1:])), nil
}

func procState(pid int) (string, error) {
	f, err := procStat(pid)
	if err != nil {
		return "", err
	}
	return f[0], nil
}

func TestCappedBufferKeepsTheStartAndCountsTheRest(t *testing.T) {
	b := &cappedBuffer{limit: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	if want := "abcde\n[vmagent: 5 more bytes dropped]\n"; b.String() != want {
		t.Fatalf("String() = %q, want %q", b.String(), want)
	}
	small := &cappedBuffer{limit: 5}
	small.Write([]byte("ab"))
	if small.String() != "ab" {
		t.Fatalf("String() = %q, want \"ab\"", small.String())
	}
}

func TestBadRequestsAreRefusedWithOneLine(t *testing.T) {
	srv := newTestServer(t)
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/exec", `{"argv": ["true"]`, "unexpected EOF"},
		{"/exec", `not json`, "invalid character"},
		{"/exec", `{"argv": ["true"], "timeout": 3}`, `unknown field "timeout"`},
		{"/exec", `{"argv": []}`, "argv is empty"},
		{"/exec", `{"argv": ["true"]} {}`, "unexpected data after the JSON object"},
		{"/exec", `{"argv": ["true"], "timeoutSeconds": -1}`, "timeoutSeconds -1 is negative"},
		{"/exec", `{"argv": ["true"], "env": ["NOEQUALS"]}`, `env entry "NOEQUALS" is not K=V`},
		{"/exec", `{"argv": "true"}`, "cannot unmarshal string"},
		{"/spawn", `{"log": "daemon.log"}`, "argv is empty"},
		{"/signal", `{"pid": 1, "signal": "STOP"}`, `unknown signal "STOP"`},
		{"/signal", `{"pid": 0, "signal": "TERM"}`, "pid 0 is not a process id"},
	} {
		status, body := post(t, srv, tc.path, tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, tc.want) ||
			!strings.HasPrefix(body, "bad "+tc.path+" request: ") || strings.Count(body, "\n") != 1 {
			t.Errorf("POST %s %s: status %d, body %q; want 400 and one line naming %q", tc.path, tc.body, status, body, tc.want)
		}
	}
}

func TestSpawnDetachesAndSignalReachesIt(t *testing.T) {
	srv := newTestServer(t)
	logPath := filepath.Join(t.TempDir(), "daemon.log")
	if err := os.WriteFile(logPath, []byte("earlier run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var spawned vmapi.SpawnResponse
	postJSON(t, srv, "/spawn", vmapi.SpawnRequest{
		Argv: []string{"sh", "-c", `trap 'echo got TERM; exit 0' TERM; echo "started $GREETING"; echo to stderr >&2; while :; do sleep 0.05; done`},
		Log:  logPath,
		Env:  []string{"GREETING=hello"},
	}, &spawned)
	if spawned.PID <= 0 {
		t.Fatalf("pid = %d", spawned.PID)
	}
	// Should the test stop early; the agent refuses this once it has reaped it.
	t.Cleanup(func() {
		post(t, srv, "/signal", `{"pid": `+strconv.Itoa(spawned.PID)+`, "signal": "KILL"}`)
	})
	waitForLog(t, logPath, "earlier run\nstarted hello\nto stderr\n")

	stat, err := procStat(spawned.PID)
	if err != nil {
		t.Fatal(err)
	}
	if stat[3] != strconv.Itoa(spawned.PID) {
		t.Fatalf("daemon %d is in session %s; want a session of its own", spawned.PID, stat[3])
	}

	var signalled vmapi.SignalResponse
	postJSON(t, srv, "/signal", vmapi.SignalRequest{PID: spawned.PID, Signal: "TERM"}, &signalled)
	if signalled != (vmapi.SignalResponse{PID: spawned.PID, Signal: "TERM"}) {
		t.Fatalf("signal answer %+v", signalled)
	}
	waitForLog(t, logPath, "got TERM\n")

	// Once the agent has reaped it, a signal is refused as to a process
	// that ended, whoever has its pid by then.
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := post(t, srv, "/signal", `{"pid": `+strconv.Itoa(spawned.PID)+`, "signal": "KILL"}`)
		if status == http.StatusNotFound && strings.Contains(body, "already ended (exit status 0)") {
			break
		}
		if status != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("signal after exit: status %d, body %q; want 404 saying it ended", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSpawnOfMissingCommandFails(t *testing.T) {
	srv := newTestServer(t)
	status, body := post(t, srv, "/spawn", `{"argv": ["/nonexistent/vmagent-daemon"]}`)
	if status != http.StatusInternalServerError || !strings.Contains(body, "/nonexistent/vmagent-daemon") {
		t.Fatalf("status %d, body %q; want 500 naming the command", status, body)
	}
}

func TestSignalToMissingProcessIsNotFound(t *testing.T) {
	srv := newTestServer(t)
	// Above the kernel's largest pid_max, so no process has it.
	status, body := post(t, srv, "/signal", `{"pid": 2000000000, "signal": "TERM"}`)
	if status != http.StatusNotFound || !strings.Contains(body, "no such process") {
		t.Fatalf("status %d, body %q; want 404 no such process", status, body)
	}
}

// waitForLog waits until the file at path ends with suffix.
func waitForLog(t *testing.T, path, suffix string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(string(data), suffix) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q; want it to end with %q", path, data, suffix)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
