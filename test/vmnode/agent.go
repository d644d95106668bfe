// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/vmnode/vmapi"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Agent is a client of test/cmd/vmagent's HTTP API, which the guest serves
// and QEMU forwards to a port on the host's loopback.
type Agent struct {
	// URL is the API's base, without a trailing slash.
	URL string
	// HTTP has no timeout of its own: an exec may last minutes, and every
	// call is bounded by its context instead.
	HTTP *http.Client
}

// NewAgent is a client of the agent that QEMU forwards to 127.0.0.1:hostPort.
func NewAgent(hostPort int) *Agent {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// The host may only ever dial loopback: never through a proxy the
	// environment names.
	transport.Proxy = nil
	return &Agent{
		URL:  "http://127.0.0.1:" + strconv.Itoa(hostPort),
		HTTP: &http.Client{Transport: transport},
	}
}

// ExecResult is what a command did in the guest.
type ExecResult struct {
	// ExitCode is the command's exit status, 128+N when signal N killed it.
	ExitCode int
	// Stdout and Stderr are the command's output, each capped by the agent
	// (16 MiB, then a line saying how much was dropped).
	Stdout, Stderr string
	// Seconds is how long the command ran, measured in the guest.
	Seconds float64

	argv []string
}

// stderrTailBytes is how much of stderr ExecResult.Err quotes.
const stderrTailBytes = 2048

// Err is nil when the command exited 0, else an error naming the command,
// its exit code and the end of its stderr.
func (r *ExecResult) Err() error {
	if r.ExitCode == 0 {
		return nil
	}
	tail := strings.TrimSpace(r.Stderr)
	if len(tail) > stderrTailBytes {
		tail = "..." + tail[len(tail)-stderrTailBytes:]
	}
	return fmt.Errorf("guest command %q: exit code %d; stderr: %s", r.argv, r.ExitCode, tail)
}

// ExecOption sets a field of an exec request.
type ExecOption func(*vmapi.ExecRequest)

// WithStdin gives the command stdin as its standard input (/dev/null by
// default).
func WithStdin(stdin string) ExecOption {
	return func(r *vmapi.ExecRequest) { r.Stdin = stdin }
}

// WithTimeout bounds the command in the guest, which kills its process group
// when d passes (the agent's default is 10 minutes).
func WithTimeout(d time.Duration) ExecOption {
	return func(r *vmapi.ExecRequest) { r.TimeoutSeconds = d.Seconds() }
}

// WithEnv adds K=V entries to the agent's environment for the command.
func WithEnv(env ...string) ExecOption {
	return func(r *vmapi.ExecRequest) { r.Env = append(r.Env, env...) }
}

// Exec runs argv in the guest and waits for its end. A non-zero exit is not
// an error (see ExecResult.Err); a failed request, or a command that could
// not start or timed out, is. In the last two cases the result comes with the
// error, holding whatever output there was.
func (a *Agent) Exec(ctx context.Context, argv []string, opts ...ExecOption) (*ExecResult, error) {
	req := vmapi.ExecRequest{Argv: argv}
	for _, opt := range opts {
		opt(&req)
	}
	// A guest that stops answering (a reclaim livelock, a panic) must not
	// hang the test: the request ends a little after the command's own limit.
	limit := defaultExecLimit
	if req.TimeoutSeconds > 0 {
		limit = time.Duration(req.TimeoutSeconds * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, limit+execSlack)
	defer cancel()
	var resp vmapi.ExecResponse
	if err := a.post(ctx, "/exec", req, &resp); err != nil {
		return nil, fmt.Errorf("guest exec %q: %w", argv, err)
	}
	res := &ExecResult{ExitCode: resp.ExitCode, Stdout: resp.Stdout, Stderr: resp.Stderr, Seconds: resp.Seconds, argv: argv}
	if resp.Error != "" {
		return res, fmt.Errorf("guest exec %q: %s", argv, resp.Error)
	}
	return res, nil
}

// Spawn starts argv in the guest as a detached daemon whose stdout and stderr
// are appended to the guest file log (discarded when empty), env added to
// the agent's environment, and returns its pid in the guest.
func (a *Agent) Spawn(ctx context.Context, argv []string, log string, env ...string) (int, error) {
	var resp vmapi.SpawnResponse
	if err := a.post(ctx, "/spawn", vmapi.SpawnRequest{Argv: argv, Log: log, Env: env}, &resp); err != nil {
		return 0, fmt.Errorf("guest spawn %q: %w", argv, err)
	}
	return resp.PID, nil
}

// Signal sends sig ("TERM", "KILL", "INT" or "HUP") to pid in the guest. It
// fails for a daemon Spawn started that has ended since.
func (a *Agent) Signal(ctx context.Context, pid int, sig string) error {
	if err := a.post(ctx, "/signal", vmapi.SignalRequest{PID: pid, Signal: sig}, &struct{}{}); err != nil {
		return fmt.Errorf("guest signal %s to pid %d: %w", sig, pid, err)
	}
	return nil
}

// defaultExecLimit is the agent's own limit on a command given no timeout;
// execSlack is how much longer the host waits for the answer.
const (
	defaultExecLimit = 10 * time.Minute
	execSlack        = 30 * time.Second
)

// readyPollInterval is how often WaitReady asks.
const readyPollInterval = 200 * time.Millisecond

// readyProbeTimeout bounds one health check: QEMU accepts on the host port
// before the guest does, so a connection may hang rather than fail.
const readyProbeTimeout = 5 * time.Second

// WaitReady polls the agent's /healthz until it answers "ok" or ctx ends,
// and then returns the last probe's error with ctx's.
func (a *Agent) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(readyPollInterval)
	defer tick.Stop()
	for {
		err := a.healthz(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("guest agent at %s not ready: %w (last probe: %v)", a.URL, context.Cause(ctx), err)
		case <-tick.C:
		}
	}
}

func (a *Agent) healthz(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("GET /healthz: %s %q", resp.Status, body)
	}
	return nil
}

// post sends in as JSON to path and decodes a 200 answer into out. Any other
// status is an error carrying the agent's one-line message.
func (a *Agent) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("POST %s: decode answer: %w", path, err)
	}
	return nil
}

// Connect opens a TCP connection to target (HOST:PORT) from inside the
// guest, through the agent's CONNECT: the host's way to the guest's pod
// IPs (framework.EgressProxy.Beyond).
func (a *Agent) Connect(target string) (net.Conn, error) {
	return framework.DialConnect("tcp", strings.TrimPrefix(a.URL, "http://"), target)
}
