// SPDX-License-Identifier: Apache-2.0

package proc

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

func TestStop(t *testing.T) {
	tests := []struct {
		name       string
		script     string
		grace      time.Duration
		wantKilled bool
	}{
		{name: "leaves on SIGTERM", script: "sleep 60 & echo ready; wait", grace: 5 * time.Second},
		{name: "ignores SIGTERM", script: "trap '' TERM; sleep 60 & echo ready; wait; sleep 60", grace: 300 * time.Millisecond, wantKilled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The shell says ready once its trap is set and its child started.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := exec.Command("sh", "-c", tt.script)
			cmd.Stdout = w
			p, err := Start(cmd, clock.RealClock{})
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Stop(0) })
			ready := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(r).ReadString('\n')
				ready <- line
			}()
			select {
			case line := <-ready:
				if line != "ready\n" {
					t.Fatalf("the shell said %q, want ready", line)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the shell did not say ready in 30s")
			}
			if got := p.Stop(tt.grace); got != tt.wantKilled {
				t.Errorf("killed = %v, want %v", got, tt.wantKilled)
			}
			if !p.Exited() {
				t.Fatal("leader still running after Stop")
			}
			// Nothing of the group may survive, the backgrounded sleep included.
			// It is not our child, so its zombie goes to init to reap: allow
			// that a moment.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if err = syscall.Kill(-p.Pid(), 0); errors.Is(err, syscall.ESRCH) {
					break
				}
			}
			if !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process group %d still has members (kill 0: %v)", p.Pid(), err)
			}
			state, at, _ := p.Result()
			if state == nil || at.IsZero() {
				t.Errorf("Result = %v at %v, want an exit state and time", state, at)
			}
		})
	}
}

func TestStartError(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/binary"), clock.RealClock{}); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
}
