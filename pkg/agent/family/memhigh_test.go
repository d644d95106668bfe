// SPDX-License-Identifier: Apache-2.0

package family

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var mhThresholds = memhigh.Thresholds{HighRate: 10, MaxRate: 1, Some: 0.1, Window: 10 * time.Second, Grace: 30 * time.Second}

// scriptedContainers are containers whose memory.events high grows by
// perSec each second of the script; highSet false reads memory.high "max".
type scriptedContainers struct {
	perSec  map[string]uint64 // by pod UID: one container each, ID "c-<uid>"
	highSet map[string]bool
	counts  map[string]uint64
	errs    []error
}

func (s *scriptedContainers) read(*pressure.Observation) ([]memhigh.Sample, []error) {
	var out []memhigh.Sample
	for uid, n := range s.perSec {
		s.counts[uid] += n
		out = append(out, memhigh.Sample{PodUID: uid, ContainerID: "c-" + uid, Cgroup: "/kubepods/pod" + uid + "/c-" + uid,
			HighSet: s.highSet[uid], High: 1 << 29, HighEvents: s.counts[uid], HasPSI: true})
	}
	return out, s.errs
}

func mhPod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-" + uid, UID: types.UID(uid)},
		Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "app", ContainerID: "containerd://c-" + uid}}}}
}

// One pod throttled at memory.high, one without memory.high hitting its
// limit, one busy below: the signal counts the first once it is over, and
// only it becomes a target, after the grace period, naming its container
// and the signal.
func TestMemHighFamily(t *testing.T) {
	src := &scriptedContainers{
		perSec:  map[string]uint64{"stuck": 50, "nohigh": 500, "quiet": 0},
		highSet: map[string]bool{"stuck": true, "quiet": true},
		counts:  map[string]uint64{},
	}
	pods := []*v1.Pod{mhPod("stuck"), mhPod("nohigh"), mhPod("quiet")}
	f := NewMemHigh(mhThresholds, src.read, func() []*v1.Pod { return pods }, nil, nil)
	obs := &pressure.Observation{}
	var eligibleAt time.Time
	for i := 1; i <= 60; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		if err := f.Observe(obs, now); err != nil {
			t.Fatal(err)
		}
		sig := map[thresholds.Signal]thresholds.Observation{}
		f.Assess(sig)
		o, ok := sig[thresholds.MemoryHighStuck]
		if !ok || o.Capacity != 2 {
			t.Fatalf("at %v: observation %+v, want two pods watched (memory.high set)", now.Sub(t0), o)
		}
		cands, ok := f.Targets(thresholds.MemoryHighStuck, nil, pods, rank.Options{})
		if !ok {
			t.Fatal("the family does not rank its own signal")
		}
		for _, c := range cands {
			if c.Eligible && c.UID != "stuck" {
				t.Fatalf("at %v: %s is a target: %s", now.Sub(t0), c.UID, c.MemoryHigh)
			}
			if c.Eligible && eligibleAt.IsZero() {
				eligibleAt = now
				if !strings.HasPrefix(c.MemoryHigh, "container app: memory.events high 50.0/s") {
					t.Errorf("target reason %q, want it to name the container and the signal", c.MemoryHigh)
				}
			}
		}
		if i == 60 && o.Available != -1 {
			t.Errorf("memory.highStuck available %d, want -1 (one pod over)", o.Available)
		}
	}
	// Over from 6 s (half a window of readings), a target 30 s later.
	if want := t0.Add(36 * time.Second); !eligibleAt.Equal(want) {
		t.Errorf("the stuck pod became a target at %v, want %v", eligibleAt.Sub(t0), want.Sub(t0))
	}
	if _, ok := f.Targets(thresholds.MemoryAvailable, nil, pods, rank.Options{}); ok {
		t.Error("the family ranked memory.available")
	}
}

// A container whose file is malformed: one error naming the file, the
// signal reported unreadable, and the container is no target.
func TestMemHighFamilyUnreadable(t *testing.T) {
	src := &scriptedContainers{perSec: map[string]uint64{}, highSet: map[string]bool{}, counts: map[string]uint64{},
		errs: []error{&memhigh.FileError{PodUID: "bad", ContainerID: "c-bad", Path: "pod/c-bad/memory.events", Err: errors.New(`malformed: a required key is missing`)}}}
	f := NewMemHigh(mhThresholds, src.read, nil, nil, nil)
	err := f.Observe(&pressure.Observation{}, t0)
	why, lost := Lost(f.Name(), err)
	if len(lost) != 1 || lost[0].Signal != "memory.highStuck" || lost[0].Path != "pod/c-bad/memory.events" ||
		!strings.Contains(why, "pod/c-bad/memory.events: malformed") {
		t.Fatalf("Lost = %q, %+v; want memory.highStuck unreadable at pod/c-bad/memory.events", why, lost)
	}
	// Nothing read at all: the signal is left out, never met.
	sig := map[thresholds.Signal]thresholds.Observation{}
	f.Assess(sig)
	if o, ok := sig[thresholds.MemoryHighStuck]; ok {
		t.Errorf("assessed %+v from nothing readable", o)
	}
}

func TestMemHighOffByDefault(t *testing.T) {
	if f := NewMemHigh(memhigh.Thresholds{Window: time.Second}, nil, nil, nil, nil); f != nil {
		t.Error("a memory.high family without thresholds was built")
	}
	got := Configured(Config{MemoryHigh: mhThresholds})
	if len(got) != 1 || got[0].Name() != "memory-high" {
		t.Errorf("with memory.high thresholds: %v, want the memory-high family", got)
	}
	th := mhThresholds.Threshold()
	if th.Hard() || th.GracePeriod != 30*time.Second || th.Signal != thresholds.MemoryHighStuck || th.Value.Amount(5) != 0 {
		t.Errorf("threshold %v, want memory.highStuck<0, soft with the 30s grace", th)
	}
}

// A relaxed container whose files are unreadable for one pass is still the
// one relaxed: stuck again, it is a target, not relaxed a second time.
func TestMemHighRelaxedOnceAcrossUnreadable(t *testing.T) {
	src := &scriptedContainers{perSec: map[string]uint64{"jvm": 50}, highSet: map[string]bool{"jvm": true}, counts: map[string]uint64{}}
	pods := []*v1.Pod{mhPod("jvm")}
	var now time.Time
	var relaxed []string
	f := NewMemHigh(mhThresholds, src.read, func() []*v1.Pod { return pods }, nil, func(r Relax) error {
		relaxed = append(relaxed, fmt.Sprintf("%s at %v", r.Container, now.Sub(t0)))
		return nil
	})
	obs := &pressure.Observation{}
	var eligible bool
	for i := 1; i <= 100; i++ {
		now = t0.Add(time.Duration(i) * time.Second)
		// Relaxed at 36 s; at 50 s its memory.events cannot be read.
		if i == 50 {
			src.perSec = map[string]uint64{}
			src.errs = []error{&memhigh.FileError{PodUID: "jvm", ContainerID: "c-jvm", Path: "/kubepods/podjvm/c-jvm/memory.events", Err: errors.New("input/output error")}}
		}
		err := f.Observe(obs, now)
		if i == 50 {
			if _, lost := Lost(f.Name(), err); len(lost) != 1 {
				t.Fatalf("unreadable pass: %v, want the container's file reported", err)
			}
			src.perSec, src.errs = map[string]uint64{"jvm": 50}, nil
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		cands, _ := f.Targets(thresholds.MemoryHighStuck, nil, pods, rank.Options{})
		eligible = len(cands) == 1 && cands[0].Eligible
	}
	if want := []string{"app at 36s"}; !slices.Equal(relaxed, want) {
		t.Errorf("relaxed %q, want %q", relaxed, want)
	}
	if !eligible {
		t.Error("the relaxed container, stuck again after an unreadable pass, is no target")
	}
}
