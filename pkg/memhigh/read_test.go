// SPDX-License-Identifier: Apache-2.0

package memhigh

import (
	"errors"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/pressure"
)

const (
	idA = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	idB = "b1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	idC = "c1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
)

func TestContainerID(t *testing.T) {
	for dir, want := range map[string]string{
		"cri-containerd-" + idA + ".scope": idA, // systemd driver, containerd
		"crio-" + idA + ".scope":           idA, // systemd driver, CRI-O
		"docker-" + idA + ".scope":         idA,
		idA:                                idA, // cgroupfs driver
		"crio-conmon-" + idA + ".scope":    "",  // CRI-O's monitor, not the container
		"kubepods-burstable.slice":         "",
		"memory.events":                    "",
		strings.ToUpper(idA):               "",
		idA[:63]:                           "",
	} {
		if got := ContainerID(dir); got != want {
			t.Errorf("ContainerID(%q) = %q, want %q", dir, got, want)
		}
	}
}

// A systemd-driver pod: the container with memory.high set and the one
// without it are read with their counters; CRI-O's conmon scope is not a
// container, and the pod's own cgroup, whose memory.high is "max", is not
// read.
func TestReadPodSystemd(t *testing.T) {
	got, errs := ReadPod("testdata/v2-systemd/kubepods-burstable-pod7d3f3c2a_9b1e_4c5d_8f6a_2b3c4d5e6f70.slice", "uid-1")
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := []Sample{
		{PodUID: "uid-1", ContainerID: idA, High: 536870912, HighSet: true, HighEvents: 4182, MaxEvents: 17, SomeTotal: 9123456, HasPSI: true, SomeAvg10: 23.41},
		{PodUID: "uid-1", ContainerID: idB, High: math.MaxUint64, HighEvents: 0, MaxEvents: 0, SomeTotal: 0, HasPSI: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("container %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A cgroupfs-driver pod on a kernel without PSI: memory.pressure is absent,
// the events still count.
func TestReadPodWithoutPSI(t *testing.T) {
	got, errs := ReadPod("testdata/v2-cgroupfs-nopsi/pod0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0", "uid-2")
	if len(errs) != 0 || len(got) != 1 {
		t.Fatalf("got %+v, %v; want one container", got, errs)
	}
	if s := got[0]; s.ContainerID != idC || !s.HighSet || s.High != 100<<20 || s.HighEvents != 12 || s.HasPSI {
		t.Errorf("got %+v, want %s with memory.high 100Mi, 12 high events and no PSI", s, idC)
	}
}

// Malformed files: one error each, naming the file, and the container is
// left out rather than guessed.
func TestReadPodMalformed(t *testing.T) {
	got, errs := ReadPod("testdata/malformed", "uid-3")
	if len(got) != 0 {
		t.Errorf("read %+v from malformed files", got)
	}
	want := []string{
		filepath.Join("testdata/malformed", "d"+idA[1:], "memory.events") + ": malformed",
		filepath.Join("testdata/malformed", "e"+idA[1:], "memory.pressure") + ": malformed",
		filepath.Join("testdata/malformed", "f"+idA[1:], "memory.high") + `: malformed: "12abc" is neither a number of bytes nor "max"`,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %d", errs, len(want))
	}
	for i, w := range want {
		var fe *FileError
		if !errors.As(errs[i], &fe) || fe.PodUID != "uid-3" || !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %v, want a *FileError starting %q", i, errs[i], w)
		}
	}
}

// A pod whose cgroup is gone by the time it is read (it was going away)
// is no error.
func TestReadPodGone(t *testing.T) {
	if got, errs := ReadPod(filepath.Join(t.TempDir(), "gone"), "uid"); len(got)+len(errs) != 0 {
		t.Errorf("got %v, %v for a vanished pod cgroup", got, errs)
	}
}

// A cgroup removed while it is read: a file opened after the removal is
// not found, one opened just before reads ENODEV, and either is the
// container going away once its directory is gone. A directory still there
// leaves the error reported, and so does any other error.
func TestGoneWhileRead(t *testing.T) {
	live, removed := t.TempDir(), filepath.Join(t.TempDir(), "gone")
	wrap := func(err error) error {
		return fileError(removed, "memory.events", "uid", idA, &fs.PathError{Op: "read", Path: "memory.events", Err: err})
	}
	for _, tc := range []struct {
		dir  string
		err  error
		gone bool
	}{
		{removed, wrap(syscall.ENOENT), true},
		{removed, wrap(syscall.ENODEV), true},
		{live, wrap(syscall.ENOENT), false},
		{live, wrap(syscall.ENODEV), false},
		{removed, wrap(syscall.EACCES), false},
	} {
		if got := goneWhileRead(tc.dir, tc.err); got != tc.gone {
			t.Errorf("goneWhileRead(%s, %v) = %v, want %v", tc.dir, tc.err, got, tc.gone)
		}
	}
}

func TestParseHigh(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit uint64
		set   bool
		bad   bool
	}{
		{"max\n", math.MaxUint64, false, false},
		{"536870912\n", 536870912, true, false},
		{"0\n", 0, true, false},
		{"", 0, false, true},
		{"-1\n", 0, false, true},
		{"512M\n", 0, false, true},
	} {
		limit, set, err := ParseHigh([]byte(tc.in))
		if (err != nil) != tc.bad || limit != tc.limit || set != tc.set {
			t.Errorf("ParseHigh(%q) = %d, %v, %v", tc.in, limit, set, err)
		}
	}
}

// memory.events as the kernel prints it; high and max are what count, and
// a file cut short is refused.
func TestParseEvents(t *testing.T) {
	e, err := ParseEvents([]byte("low 1\nhigh 4182\nmax 17\noom 2\noom_kill 1\noom_group_kill 0\n"))
	if err != nil || e.High != 4182 || e.Max != 17 || e.OOMKill != 1 {
		t.Errorf("ParseEvents = %+v, %v", e, err)
	}
	if _, err := ParseEvents([]byte("low 1\nhigh 4182\n")); err == nil {
		t.Error("a memory.events cut short was accepted")
	}
}

// Only cgroup v2 has memory.high: elsewhere ReadNode says so, once.
func TestReadNodeNeedsV2(t *testing.T) {
	for _, mode := range []pressure.Mode{pressure.ModeV1, pressure.ModeHybrid} {
		obs := &pressure.Observation{Layout: pressure.Layout{Mode: mode}, Pods: []pressure.PodExtras{{UID: "u", Cgroup: "/kubepods/podu"}}}
		got, errs := ReadNode(obs)
		if len(got) != 0 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "need cgroup v2") {
			t.Errorf("%s: got %v, %v; want one error saying cgroup v2 is needed", mode, got, errs)
		}
	}
	obs := &pressure.Observation{Layout: pressure.Layout{Mode: pressure.ModeV2, MemoryMount: "testdata/v2-systemd"},
		Pods: []pressure.PodExtras{{UID: "uid-1", Cgroup: "/kubepods-burstable-pod7d3f3c2a_9b1e_4c5d_8f6a_2b3c4d5e6f70.slice"}}}
	got, errs := ReadNode(obs)
	if len(got) != 2 || len(errs) != 0 {
		t.Fatalf("v2: got %d containers, %v; want 2 and no error", len(got), errs)
	}
	// The actuator writes the container's cgroup: named from the
	// hierarchy's root.
	if want := obs.Pods[0].Cgroup + "/cri-containerd-" + idA + ".scope"; got[0].Cgroup != want {
		t.Errorf("container cgroup = %q, want %q", got[0].Cgroup, want)
	}
}

const podLevelDir = "testdata/v2-pod-level/kubepods-burstable-pod3e5a7c91_2d4b_4f6e_8a1c_9b0d2e4f6a81.slice"

// A pod with a memory.high on its own cgroup (a pod-level limit) is read
// as a sample of its own, first, with the pod's own counters: its
// memory.events counts its containers' events too (4182 high and 17 max of
// container a's, at a's own memory.high and memory.max), memory.events.local
// only the times the pod's memory.high and memory.max were hit.
func TestReadPodLevel(t *testing.T) {
	got, errs := ReadPod(podLevelDir, "uid-4")
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := []Sample{
		{PodUID: "uid-4", ContainerID: PodLevel, High: 483180544, HighSet: true, HighEvents: 1508, MaxEvents: 0, SomeTotal: 14203318, HasPSI: true, SomeAvg10: 31.07},
		{PodUID: "uid-4", ContainerID: idA, High: 268435456, HighSet: true, HighEvents: 4182, MaxEvents: 17, SomeTotal: 9123456, HasPSI: true, SomeAvg10: 23.41},
		{PodUID: "uid-4", ContainerID: idB, High: math.MaxUint64, SomeTotal: 3071337, HasPSI: true, SomeAvg10: 4.10},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// The actuator writes the pod's cgroup for the pod's own sample.
	obs := &pressure.Observation{Layout: pressure.Layout{Mode: pressure.ModeV2, MemoryMount: "testdata/v2-pod-level"},
		Pods: []pressure.PodExtras{{UID: "uid-4", Cgroup: "/" + filepath.Base(podLevelDir)}}}
	got, errs = ReadNode(obs)
	if len(got) != 3 || len(errs) != 0 {
		t.Fatalf("ReadNode: got %+v, %v; want the pod and its two containers", got, errs)
	}
	if got[0].ContainerID != PodLevel || got[0].Cgroup != obs.Pods[0].Cgroup {
		t.Errorf("ReadNode: pod's own sample %+v, want cgroup %q", got[0], obs.Pods[0].Cgroup)
	}
}

// A pod-level memory.high on a kernel without memory.events.local (before
// 5.2): the hierarchical memory.events would count the containers' own
// throttling as the pod's, so the pod is reported unreadable, not guessed.
func TestReadPodLevelWithoutLocalEvents(t *testing.T) {
	dir := "testdata/malformed-pod/pod0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	got, errs := ReadPod(dir, "uid-5")
	var fe *FileError
	if len(got) != 0 || len(errs) != 1 || !errors.As(errs[0], &fe) || fe.ContainerID != PodLevel ||
		fe.Path != filepath.Join(dir, "memory.events.local") {
		t.Errorf("got %+v, %v; want one *FileError naming %s", got, errs, filepath.Join(dir, "memory.events.local"))
	}
}

// The pod's own state and its containers' are tracked apart: the pod over
// its memory.high while no container is over its own.
func TestPodLevelTrackedApart(t *testing.T) {
	d := NewDetector(testThresholds)
	pod := &container{id: PodLevel, highSet: true, highPerSec: 50}
	app := &container{id: idA, highSet: true}
	var last []State
	for i := 1; i <= 60; i++ {
		p, a := pod.step(time.Second), app.step(time.Second)
		p.PodUID, a.PodUID = "uid", "uid"
		last = d.Observe(t0.Add(time.Duration(i)*time.Second), []Sample{a, p})
	}
	if len(last) != 2 || !last[0].IsPodLevel() || !last[0].Stuck || last[1].IsPodLevel() || len(last[1].Over) != 0 {
		t.Errorf("states %+v, want the pod's own stuck, first, and its container not over", last)
	}
}
