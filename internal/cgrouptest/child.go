// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Child is the test binary re-executed as a workload (see
// RunChildIfRequested). It does nothing until asked.
type Child struct {
	cmd     *exec.Cmd
	stdin   *os.File
	lines   chan string
	exited  chan struct{}
	waitErr error // set before exited closes
}

// How long a child may take to answer, and to exit once its stdin closes.
const (
	TouchTimeout = 30 * time.Second
	stallStart   = 10 * time.Second
	stopTimeout  = 10 * time.Second
)

// StartChild starts a child and moves it into cgroups. It is killed when the
// test ends unless Stop ended it before; register it after the cgroups, so
// that it is gone before they are removed.
func StartChild(t testing.TB, cgroups ...*Cgroup) *Child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("finding the test binary to start a child: %v", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		t.Fatal(err)
	}
	// -test.run=^$: should a TestMain not call RunChildIfRequested, the
	// child runs no tests and its first answer reports that.
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		t.Fatalf("starting a child: %v", err)
	}
	c := &Child{cmd: cmd, stdin: inW, lines: make(chan string, 64), exited: make(chan struct{})}
	// Our own pipes rather than cmd's: Wait would close those under a reader
	// still draining the child's last answer.
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		outR.Close()
	}()
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.kill)
	for _, cg := range cgroups {
		if err := cg.Add(c.Pid()); err != nil {
			t.Fatalf("moving the child into its cgroup: %v", err)
		}
	}
	return c
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Touch makes the child map and touch mib MiB more of anonymous memory,
// which it keeps until it exits, and waits up to TouchTimeout for it.
func (c *Child) Touch(mib int) (Touched, error) {
	if err := c.BeginTouch(mib, nil); err != nil {
		return Touched{}, err
	}
	return c.EndTouch(TouchTimeout)
}

// Watch makes a touch read File as it goes, noting when the value first
// reaches Threshold: the moment a memory.usage_in_bytes crosses, seen from
// inside the workload.
type Watch struct {
	File      string
	Threshold int64
}

// BeginTouch asks for a touch like Touch, watching w if it is not nil, and
// returns without waiting: EndTouch collects the answer.
func (c *Child) BeginTouch(mib int, w *Watch) error {
	cmd := command{op: "touch", mib: mib}
	if w != nil {
		cmd.file, cmd.threshold = w.File, w.Threshold
	}
	return c.send(cmd)
}

// EndTouch waits up to timeout for the answer to BeginTouch.
func (c *Child) EndTouch(timeout time.Duration) (Touched, error) {
	l, err := c.reply(timeout)
	if err != nil {
		return Touched{}, err
	}
	return parseTouched(l)
}

// BeginStall makes the child read random pages of file for d (see
// ColdFile), and returns once it has started. The child takes no other
// command until then.
func (c *Child) BeginStall(file string, d time.Duration) error {
	if err := c.send(command{op: "stall", file: file, stall: d}); err != nil {
		return err
	}
	l, err := c.reply(stallStart)
	if err != nil {
		return err
	}
	if l != "stalling" {
		return fmt.Errorf("child answered %q to a stall", l)
	}
	return nil
}

// Stop closes the child's stdin and waits for it to exit, as it does once it
// has finished its commands; it returns an error if the child fails or has
// to be killed.
func (c *Child) Stop() error {
	_ = c.stdin.Close() // a second Stop finds it closed
	select {
	case <-c.exited:
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("child %d did not exit within %v of its stdin closing, killed", c.Pid(), stopTimeout)
	}
	if c.waitErr != nil {
		return fmt.Errorf("child %d: %w", c.Pid(), c.waitErr)
	}
	return nil
}

// kill ends the child at once, whatever it is doing.
func (c *Child) kill() {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Kill() // fails only if it has exited already
	<-c.exited
}

func (c *Child) send(cmd command) error {
	if _, err := fmt.Fprintln(c.stdin, cmd.String()); err != nil {
		return fmt.Errorf("sending %q to the child: %w", cmd.String(), err)
	}
	return nil
}

// reply returns the child's next answer.
func (c *Child) reply(timeout time.Duration) (string, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case l, ok := <-c.lines:
		if !ok {
			<-c.exited
			return "", fmt.Errorf("child exited without answering (%v); does the test binary's TestMain call cgrouptest.RunChildIfRequested?", c.waitErr)
		}
		return l, nil
	case <-timer.C:
		return "", fmt.Errorf("no answer from the child within %v", timeout)
	}
}
