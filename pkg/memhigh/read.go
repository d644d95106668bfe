// SPDX-License-Identifier: Apache-2.0

package memhigh

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/evictd/evictd/pkg/pressure"
)

// PodLevel is the ContainerID of the samples and states of a pod's own
// cgroup: a pod-level memory limit (spec.resources, KEP-2837) sits on the
// pod's cgroup, where a memory.high throttles every container of the pod
// together while none is over its own. No runtime's container ID is empty.
const PodLevel = ""

// Sample is one reading of a container cgroup's memory.high state, or of
// the pod's own cgroup (ContainerID PodLevel).
type Sample struct {
	// PodUID and ContainerID name the container: its ID as the runtime
	// puts it in the cgroup's name (and in the pod's containerStatuses).
	PodUID, ContainerID string
	// Cgroup is the container's (or the pod's) cgroup relative to the
	// hierarchy's root, for the actuator (ReadNode; ReadPod leaves it "").
	Cgroup string
	// High is memory.high in bytes; HighSet is false when it reads "max".
	High    uint64
	HighSet bool
	// HighEvents and MaxEvents are memory.events' high and max counters.
	HighEvents, MaxEvents uint64
	// SomeTotal is memory.pressure's "some" total in µs; HasPSI is false
	// when the kernel keeps no PSI (psi=0 at boot: the file is absent).
	SomeTotal uint64
	HasPSI    bool
	// SomeAvg10 is the kernel's own 10 s average of the same, in percent,
	// for a one-off look (evictd observe); the agent uses the totals.
	SomeAvg10 float64
}

// FileError is a container cgroup file that could not be read or parsed:
// its container reports nothing in that pass.
type FileError struct {
	PodUID, ContainerID string
	Path                string
	Err                 error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *FileError) Unwrap() error { return e.Err }

// ContainerID is the runtime's container ID in a container cgroup's
// directory name (pressure.ContainerIDOfCgroup), "" for a directory that is
// not a container's: CRI-O's conmon scope is the monitor, not the container.
func ContainerID(dir string) string {
	if strings.Contains(dir, "conmon-") {
		return ""
	}
	return pressure.ContainerIDOfCgroup(dir)
}

// ReadPod reads the container cgroups under a pod's cgroup directory (v2),
// and the pod's own cgroup first (ContainerID PodLevel) when its memory.high
// is set. A container whose cgroup vanished while being read is left out
// quietly (it was going away); one whose file is unreadable or malformed is
// left out with a *FileError naming the file.
func ReadPod(podDir, podUID string) ([]Sample, []error) { return readPod(podDir, "", podUID) }

// readPod is ReadPod, naming each cgroup under podCgroup when it is not "".
func readPod(podDir, podCgroup, podUID string) ([]Sample, []error) {
	entries, err := os.ReadDir(podDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{&FileError{PodUID: podUID, Path: podDir, Err: err}}
	}
	var out []Sample
	var errs []error
	switch s, ok, err := readPodLevel(podDir, podUID); {
	case err != nil:
		if !goneWhileRead(podDir, err) {
			errs = append(errs, err)
		}
	case ok:
		s.Cgroup = podCgroup
		out = append(out, s)
	}
	for _, e := range entries {
		id := ContainerID(e.Name())
		if !e.IsDir() || id == "" {
			continue
		}
		s, err := readContainer(filepath.Join(podDir, e.Name()), podUID, id)
		switch {
		case err == nil:
			if podCgroup != "" {
				s.Cgroup = path.Join(podCgroup, e.Name())
			}
			out = append(out, s)
		case !goneWhileRead(filepath.Join(podDir, e.Name()), err):
			errs = append(errs, err)
		}
	}
	return out, errs
}

// goneWhileRead reports whether err, reading a file of the cgroup dir, is
// that cgroup going away rather than a file evictd cannot read. A file
// opened just before the removal reads ENODEV, not ENOENT, as pkg/pressure's
// gone and the actuator know. Either counts only once the directory is gone
// too: a file removed from a cgroup that stays is no container leaving.
func goneWhileRead(dir string, err error) bool {
	return (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)) && gone(dir)
}

// gone reports whether a cgroup directory no longer exists.
func gone(dir string) bool {
	_, err := os.Stat(dir)
	return errors.Is(err, fs.ErrNotExist)
}

func readContainer(dir, podUID, id string) (Sample, error) {
	s := Sample{PodUID: podUID, ContainerID: id}
	b, err := os.ReadFile(filepath.Join(dir, "memory.high"))
	if err != nil {
		return Sample{}, fileError(dir, "memory.high", podUID, id, err)
	}
	if s.High, s.HighSet, err = ParseHigh(b); err != nil {
		return Sample{}, fileError(dir, "memory.high", podUID, id, err)
	}
	return readCounters(dir, "memory.events", s)
}

// readPodLevel reads the pod's own cgroup, ok only when its memory.high is
// set: without a pod-level limit the pod's figures are its containers',
// which are read on their own. A pod cgroup without memory.high (no memory
// controller in it) is not read either.
//
// The events are memory.events.local, the times the pod's own memory.high
// and memory.max were hit: memory.events is hierarchical and counts each
// container hitting its own limits too, which would report one container's
// throttling twice and, relaxed at the pod's level, not help it. Kernels
// before 5.2 have no memory.events.local; the pod is then reported
// unreadable rather than read from the sums. memory.pressure has no local
// form: the pod's stall share is all of its tasks', whatever limit they
// stalled on.
func readPodLevel(dir, podUID string) (Sample, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.high"))
	if errors.Is(err, fs.ErrNotExist) && !gone(dir) {
		return Sample{}, false, nil
	}
	if err != nil {
		return Sample{}, false, fileError(dir, "memory.high", podUID, PodLevel, err)
	}
	s := Sample{PodUID: podUID, ContainerID: PodLevel}
	if s.High, s.HighSet, err = ParseHigh(b); err != nil {
		return Sample{}, false, fileError(dir, "memory.high", podUID, PodLevel, err)
	}
	if !s.HighSet {
		return Sample{}, false, nil
	}
	s, err = readCounters(dir, "memory.events.local", s)
	return s, err == nil, err
}

func fileError(dir, name, podUID, id string, err error) error {
	return &FileError{PodUID: podUID, ContainerID: id, Path: filepath.Join(dir, name), Err: err}
}

// readCounters fills s from dir's events file and memory.pressure.
func readCounters(dir, events string, s Sample) (Sample, error) {
	fail := func(name string, err error) (Sample, error) {
		return Sample{}, fileError(dir, name, s.PodUID, s.ContainerID, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, events))
	if err != nil {
		return fail(events, err)
	}
	ev, err := ParseEvents(b)
	if err != nil {
		return fail(events, err)
	}
	s.HighEvents, s.MaxEvents = ev.High, ev.Max
	b, err = os.ReadFile(filepath.Join(dir, "memory.pressure"))
	switch {
	case errors.Is(err, fs.ErrNotExist) && !gone(dir):
		return s, nil // no PSI on this kernel: the other two signals still count
	case err != nil:
		return fail("memory.pressure", err)
	}
	psi, err := pressure.ParsePSI(b)
	if err != nil {
		return fail("memory.pressure", fmt.Errorf("malformed: %w", err))
	}
	s.SomeTotal, s.HasPSI, s.SomeAvg10 = psi.Some.Total, true, psi.Some.Avg10
	return s, nil
}

// ParseHigh parses memory.high: a number of bytes, or "max" for none.
func ParseHigh(b []byte) (limit uint64, set bool, err error) {
	v := string(bytes.TrimSuffix(b, []byte{'\n'}))
	if v == "max" {
		return math.MaxUint64, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("malformed: %q is neither a number of bytes nor \"max\"", v)
	}
	return n, true, nil
}

// ParseEvents parses memory.events, which must hold the high and max
// counters.
func ParseEvents(b []byte) (pressure.MemoryEvents, error) {
	e, err := pressure.ParseMemoryEvents(b)
	if err != nil {
		return e, fmt.Errorf("malformed: %w", err)
	}
	return e, nil
}

// ReadNode reads the container cgroups of every pod in obs. It needs
// cgroup v2: v1 has no memory.high, and hybrid's memory controller is v1.
func ReadNode(obs *pressure.Observation) ([]Sample, []error) {
	if obs.Layout.Mode != pressure.ModeV2 {
		return nil, []error{fmt.Errorf("containers at memory.high need cgroup v2; this node's memory controller is %s", obs.Layout.Mode)}
	}
	var out []Sample
	var errs []error
	for i := range obs.Pods {
		x := &obs.Pods[i]
		if x.Cgroup == "" || x.UID == "" {
			continue
		}
		s, e := readPod(filepath.Join(obs.Layout.MemoryMount, x.Cgroup), x.Cgroup, x.UID)
		out = append(out, s...)
		errs = append(errs, e...)
	}
	return out, errs
}
