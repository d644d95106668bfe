// SPDX-License-Identifier: Apache-2.0

// Package proc runs the child processes of the test harness (control-plane
// binaries, simulated containers) so that they can never outlive it: each
// runs in its own process group, which is what gets signalled, and the kernel
// SIGKILLs it when the harness dies, even by a test timeout that skips every
// cleanup.
package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// Proc is a started process and its group.
type Proc struct {
	cmd   *exec.Cmd
	clock clock.PassiveClock
	done  chan struct{}

	mu       sync.Mutex
	state    *os.ProcessState
	waitErr  error
	exitedAt time.Time
}

// Start starts cmd in a new process group with a parent-death SIGKILL and
// begins waiting for it. cmd.SysProcAttr, if set, keeps its other fields.
func Start(cmd *exec.Cmd, clk clock.PassiveClock) (*Proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Proc{cmd: cmd, clock: clk, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.state, p.waitErr, p.exitedAt = cmd.ProcessState, err, clk.Now()
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id, which is also its process group id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Result is the exit state, when the exit was seen and the error from Wait;
// all zero until Done is closed.
func (p *Proc) Result() (*os.ProcessState, time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.exitedAt, p.waitErr
}

// Signal sends sig to the whole process group. A group that is already gone
// is not an error.
func (p *Proc) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.Pid(), sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("send %s to process group %d: %w", sig, p.Pid(), err)
}

// Stop sends SIGTERM to the group, waits up to grace for the leader to exit,
// then SIGKILLs the group and waits for it. It returns whether SIGKILL was
// needed. Members of the group other than the leader get SIGKILL too, so a
// leader that exits early leaves nothing behind.
func (p *Proc) Stop(grace time.Duration) (killed bool) {
	if !p.Exited() {
		_ = p.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-p.done:
		case <-t.C:
			killed = true
		}
		t.Stop()
	}
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
	return killed
}
