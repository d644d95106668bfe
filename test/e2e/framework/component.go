// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/test/internal/proc"
)

// stopGrace is how long a control-plane process gets to exit on SIGTERM.
const stopGrace = 10 * time.Second

// component is one control-plane process with its log file.
type component struct {
	name    string
	logPath string
	log     *os.File
	p       *proc.Proc
}

func startComponent(dir, name, bin string, args []string) (*component, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	p, err := proc.Start(cmd, clock.RealClock{})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &component{name: name, logPath: logPath, log: f, p: p}, nil
}

// exitErr says how the process ended, or nil while it runs.
func (c *component) exitErr() error {
	if !c.p.Exited() {
		return nil
	}
	state, _, err := c.p.Result()
	if err == nil {
		err = fmt.Errorf("%s", state)
	}
	return fmt.Errorf("%s exited: %w; last log lines:\n%s", c.name, err, TailFile(c.logPath, 20))
}

func (c *component) stop() {
	c.p.Stop(stopGrace)
	c.log.Close()
}

// TailFile returns the last n lines of a file, or a note saying why it
// cannot.
func TailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return LastLines(string(b), n)
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
