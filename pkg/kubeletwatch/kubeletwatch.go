// SPDX-License-Identifier: Apache-2.0

// Package kubeletwatch notices when the node's kubelet process changes: the
// kubelet reads its configuration only when it starts, so a new kubelet
// process is the one moment its eviction thresholds can have changed, and
// the moment evictd reads them again (pkg/kubeletcfg).
//
// A process is its PID and its start time (/proc/PID/stat's 22nd field): a
// kubelet restarted under the PID an earlier one had is still another
// process. Only /proc is read, under an injected directory (HOST/proc).
package kubeletwatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/hostpaths/hostfile"
	"github.com/evictd/evictd/pkg/kubeletcfg"
)

// Process is one kubelet process; the zero Process is none.
type Process struct {
	PID int
	// Start is the process's start time, in clock ticks after boot.
	Start uint64
}

// IsZero reports whether p is no process.
func (p Process) IsZero() bool { return p.PID == 0 }

func (p Process) String() string {
	if p.IsZero() {
		return "no kubelet process"
	}
	return fmt.Sprintf("kubelet pid %d (started at tick %d)", p.PID, p.Start)
}

// Find returns the kubelet process under procDir (the lowest PID whose
// command line is a kubelet's and which runs outside the pods' cgroups, as
// kubeletcfg.Read takes it); the zero Process when there is none. A
// kubelet that exits between the listing and the read of its stat is
// none. refused hears of each process named kubelet passed over (nil:
// none is told).
func Find(procDir string, refused func(kubeletcfg.Refused)) (Process, error) {
	found, err := kubeletcfg.FindProcess(procDir, refused)
	if err != nil || found.Argv == nil {
		return Process{}, err
	}
	pid := found.PID
	start, err := startTime(procDir, pid)
	if errors.Is(err, fs.ErrNotExist) {
		return Process{}, nil
	}
	if err != nil {
		return Process{}, err
	}
	return Process{PID: pid, Start: start}, nil
}

// startTime reads PID's start time from procDir/PID/stat.
func startTime(procDir string, pid int) (uint64, error) {
	p := filepath.Join(procDir, strconv.Itoa(pid), "stat")
	data, err := hostfile.Read(p, hostfile.ProcLimit)
	if err != nil {
		return 0, err
	}
	st, err := ParseStartTime(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return st, nil
}

// ParseStartTime reads the start time, field 22, of a /proc/PID/stat line
// (proc(5)). Field 2, the command name in parentheses, may itself hold
// spaces and parentheses: the fields are counted after its last ')'.
func ParseStartTime(stat []byte) (uint64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("stat %q: no command name in parentheses", firstBytes(stat))
	}
	// After ") ": field 3 (state) onwards; the start time is the 20th of
	// these.
	fields := bytes.Fields(stat[end+1:])
	const startField = 22 - 3
	if len(fields) <= startField {
		return 0, fmt.Errorf("stat %q: %d fields after the command name, want at least %d", firstBytes(stat), len(fields), startField+1)
	}
	v, err := strconv.ParseUint(string(fields[startField]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat start time %q: %w", fields[startField], err)
	}
	return v, nil
}

func firstBytes(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// Watcher tells when the kubelet process is another than the last seen.
// It is not safe for concurrent use; Run uses it from one goroutine.
type Watcher struct {
	procDir string
	last    Process
	// Refused hears of each process named kubelet that a scan passes over
	// (kubeletcfg.FindProcess); nil: none is told.
	Refused func(kubeletcfg.Refused)
}

// New returns a Watcher under procDir that takes last as the kubelet
// process already seen (the one whose configuration was read; zero when
// none was found).
func New(procDir string, last Process) *Watcher {
	return &Watcher{procDir: procDir, last: last}
}

// Last is the kubelet process last seen.
func (w *Watcher) Last() Process { return w.last }

// Check looks at /proc once and reports whether the kubelet process
// changed since the last Check (or New): another PID, the same PID with
// another start time, a kubelet where there was none, or none where there
// was one. While the last one lives it costs one read of its stat; only
// then is /proc scanned for a kubelet's command line.
func (w *Watcher) Check() (changed bool, now Process, err error) {
	if !w.last.IsZero() {
		st, err := startTime(w.procDir, w.last.PID)
		if err == nil && st == w.last.Start {
			return false, w.last, nil
		}
	}
	now, err = Find(w.procDir, w.Refused)
	if err != nil {
		return false, w.last, err
	}
	changed = now != w.last
	w.last = now
	return changed, now, nil
}

// Run checks every interval until ctx ends and, after each check, calls
// checked(prev, now, changed) on Run's goroutine, so that the caller can
// also retry what it could not finish at an earlier one; a failed check is
// passed to fail instead. No check is made at once: the caller read the
// kubelet New was given.
func (w *Watcher) Run(ctx context.Context, clk clock.WithTicker, interval time.Duration, checked func(prev, now Process, changed bool), fail func(error)) {
	tick := clk.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		prev := w.last
		ch, now, err := w.Check()
		if err != nil {
			if fail != nil {
				fail(err)
			}
			continue
		}
		checked(prev, now, ch)
	}
}
