// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/evictd/evictd/test/vmnode/vmapi"

	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

const (
	// defaultExecTimeout bounds a command whose request sets no timeout;
	// the guest runs about 40 times slower than the host.
	defaultExecTimeout = 10 * time.Minute
	// maxOutputBytes caps each of stdout and stderr, so that a runaway
	// command cannot exhaust the guest's memory (it has no swap).
	maxOutputBytes = 16 << 20
	// pipeDrainDelay is how long the agent waits, once the command has
	// exited, for processes it left in the background to close their copy
	// of its stdout and stderr. Daemons belong in /spawn.
	pipeDrainDelay = 2 * time.Second
)

// execute runs one command to its end, its timeout, or ctx's end, and
// reports what happened; it never fails as such.
func execute(ctx context.Context, req vmapi.ExecRequest) vmapi.ExecResponse {
	timeout := defaultExecTimeout
	if req.TimeoutSeconds > 0 {
		timeout = time.Duration(req.TimeoutSeconds * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Env = append(os.Environ(), req.Env...)
	if req.Stdin != "" {
		cmd.Stdin = strings.NewReader(req.Stdin)
	}
	stdout := &cappedBuffer{limit: maxOutputBytes}
	stderr := &cappedBuffer{limit: maxOutputBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that a timeout kills what it started too
	// (sh -c 'a | b' leaves a and b holding the output pipes otherwise).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = pipeDrainDelay

	start := time.Now()
	err := cmd.Run()
	resp := vmapi.ExecResponse{
		ExitCode: -1,
		Stdout:   stdout.String(),
		Stderr:   stderr.String(),
		Seconds:  time.Since(start).Seconds(),
	}
	switch {
	case cmd.ProcessState == nil:
		resp.Error = fmt.Sprintf("start %q: %v", req.Argv[0], err)
	case ctx.Err() != nil && !cmd.ProcessState.Exited():
		// Killed by cmd.Cancel, not by itself.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			resp.Error = fmt.Sprintf("timed out after %v; its process group was killed", timeout)
		} else {
			resp.Error = fmt.Sprintf("cancelled (%v); its process group was killed", context.Cause(ctx))
		}
	default:
		resp.ExitCode = exitCode(cmd.ProcessState)
	}
	return resp
}

// exitCode is the status a shell would report: 128+N for death by signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// cappedBuffer keeps the first limit bytes written to it and counts the rest.
// It never fails a write: failing would make the command see EPIPE and
// behave differently than it would with its output read to the end.
type cappedBuffer struct {
	buf     bytes.Buffer
	limit   int
	dropped int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	keep := min(len(p), max(c.limit-c.buf.Len(), 0))
	c.buf.Write(p[:keep])
	c.dropped += int64(len(p) - keep)
	return len(p), nil
}

// String is what was kept, with a last line saying how much was not.
func (c *cappedBuffer) String() string {
	if c.dropped == 0 {
		return c.buf.String()
	}
	return fmt.Sprintf("%s\n[vmagent: %d more bytes dropped]\n", c.buf.String(), c.dropped)
}
