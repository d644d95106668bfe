// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"math"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/inflight"
)

// queue hands items from other goroutines (the informer's, the calls')
// to the loop's next pass.
type queue[T any] struct {
	mu    sync.Mutex
	items []T
}

func (q *queue[T]) push(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, item)
}

func (q *queue[T]) drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

func (q *queue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// goneQueue holds the pods in flight whose deletion the informer saw, for
// the pass's settling.
type goneQueue struct{ queue[goneItem] }

type goneItem struct {
	e  inflight.Entry
	at time.Time
}

// settleVictims brings the pods in flight up to date with the pass: those
// gone, those stuck past their wait, and those whose memory is back.
func (l *Loop) settleVictims(v *view) {
	var left []inflight.Entry
	goneNow := func(e inflight.Entry, at time.Time) {
		if l.stillRunning(v, e) {
			l.inflight.Keep(e)
			return
		}
		l.victimGone(e, at)
		for _, f := range l.families {
			f.Gone(e, at)
		}
		left = append(left, e)
	}
	for _, g := range l.inbox.gone.drain() {
		goneNow(g.e, g.at)
	}
	gone, expired := l.inflight.Sync(v.pods, v.now)
	for _, e := range gone {
		goneNow(e, v.now)
	}
	for _, e := range expired {
		l.victimStuck(v, e)
	}
	for _, e := range l.inflight.Snapshot() {
		if e.Prolonged.Equal(v.now) {
			l.victimProlonged(e, v.now)
		}
	}
	for _, uid := range l.published.health.stuckUIDs() {
		if !l.inflight.Stuck(uid) {
			l.published.health.setStuck(uid, "") // gone at last
		}
	}
	l.deps.Metrics.SetStuckVictims(len(l.published.health.stuckUIDs()))
	l.inflight.NoteMemory(func(uid types.UID) (int64, bool) {
		ps := v.podStats(uid)
		if ps == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
			return 0, false
		}
		return int64(min(*ps.Memory.WorkingSetBytes, uint64(math.MaxInt64))), true
	}, v.now)
	l.inflight.NoteDisk(func(uid types.UID) (int64, int64, bool) {
		ps := v.podStats(uid)
		if ps == nil || ps.EphemeralStorage == nil || ps.EphemeralStorage.UsedBytes == nil || ps.EphemeralStorage.InodesUsed == nil {
			return 0, 0, false
		}
		fs := ps.EphemeralStorage
		return int64(min(*fs.UsedBytes, uint64(math.MaxInt64))), int64(min(*fs.InodesUsed, uint64(math.MaxInt64))), true
	}, v.now)
	l.memoryBack(v, append(left, l.inflight.Snapshot()...))
}

// stillRunning: the pod's object is gone but the observation still finds
// its processes, holding memory (a force delete, grace 0: the API forgets
// the pod before the kubelet has killed it). Its memory is not back yet, so
// it keeps counting as reclaim in flight, until its processes are gone or
// its wait runs out.
func (l *Loop) stillRunning(v *view, e inflight.Entry) bool {
	if !e.Expires.IsZero() && !v.now.Before(e.Expires) {
		return false
	}
	ps := v.podStats(e.UID)
	if ps == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil || *ps.Memory.WorkingSetBytes == 0 {
		return false
	}
	return hasProcesses(ps)
}

// hasProcesses: the pod's cgroup still has processes (or the observation
// does not count them).
func hasProcesses(ps *statsapi.PodStats) bool {
	return ps.ProcessStats == nil || ps.ProcessStats.ProcessCount == nil || *ps.ProcessStats.ProcessCount > 0
}

func (l *Loop) victimGone(e inflight.Entry, at time.Time) {
	l.released(e.UID, at)
	took := at.Sub(e.Start)
	if e.Origin != inflight.Evicted {
		l.deps.Log.Debug("pod in flight gone", zap.String("pod", e.Pod), zap.String("origin", string(e.Origin)), zap.Duration("took", took))
		return
	}
	l.deps.Metrics.ObservePodGone(e.Signal, took)
	l.deps.Log.Info("evicted pod gone", zap.String("pod", e.Pod), zap.String("signal", string(e.Signal)), zap.Duration("took", took))
}

// victimProlonged is a pod in flight still there after its grace period and
// the wait after it, whose teardown the last GoneTimeout saw moving (its
// figures falling, its containers stopping): reclaim on its way, not a lost
// bet, so it keeps counting while it moves, up to TeardownCap after its
// grace period. Said once, when it first counts past the wait.
func (l *Loop) victimProlonged(e inflight.Entry, now time.Time) {
	log := l.deps.Log.Debug
	if e.Origin == inflight.Evicted {
		log = l.deps.Log.Info
	}
	log("victim still being torn down past its wait; its reclaim still counts while it moves",
		zap.String("pod", e.Pod), zap.String("origin", string(e.Origin)), zap.String("signal", string(e.Signal)),
		zap.Duration("waited", now.Sub(e.Start).Round(time.Second)), zap.Duration("lastProgress", now.Sub(e.Moved).Round(time.Millisecond)),
		zap.Time("atMostUntil", e.ReclaimBy.Add(l.cfg.InFlight.TeardownCap)))
}

// victimStuck is a pod in flight still there after its grace period and the
// wait after it (a finalizer, a hung volume unmount, a runtime that cannot
// kill it), with no progress of its teardown for that wait, or past the
// cap of a teardown that moves. Its usage is back in the observation, so its reclaim stops
// counting and the next candidate may go. Stuck means still holding: only
// an evictd victim whose cgroup still holds what it was evicted for is said
// loudly (a warning, an Event, the metric, readiness); one whose processes
// are gone while its object waits on a finalizer or an unmount has given
// its resources back, and a pod someone else was deleting is not evictd's
// to report.
func (l *Loop) victimStuck(v *view, e inflight.Entry) {
	now := v.now
	l.released(e.UID, now)
	if e.Origin != inflight.Evicted && e.Origin != inflight.Terminating {
		l.deps.Log.Debug("pod in flight no longer counts", zap.String("pod", e.Pod), zap.String("origin", string(e.Origin)))
		return
	}
	res := episode.Of(e.Signal)
	waited := now.Sub(e.Start).Round(time.Second)
	if e.Origin != inflight.Evicted || !stillHolding(v, e) {
		l.deps.Log.Info("pod in flight still terminating, holding nothing evictd waits for; its reclaim no longer counts",
			zap.String("pod", e.Pod), zap.String("origin", string(e.Origin)), zap.Duration("waited", waited))
		return
	}
	l.deps.Metrics.VictimStuck(string(res))
	l.deps.Log.Warn("victim not gone in time; its reclaim no longer counts", zap.String("pod", e.Pod), zap.String("resource", string(res)),
		zap.String("origin", string(e.Origin)), zap.Time("reclaimBy", e.ReclaimBy), zap.Duration("waited", waited))
	l.published.health.setStuck(e.UID, fmt.Sprintf("evicted pod %s still terminating %s after its eviction: the node cannot stop it", e.Pod, waited))
	l.deps.Evictor.VictimStuck(e.Namespace, e.Name, e.UID, fmt.Sprintf(
		"Pod still terminating %s after its eviction (grace period ended at %s): evictd no longer counts on what it frees and may evict the next candidate. Look for finalizers or a runtime that cannot stop it.",
		waited, e.ReclaimBy.UTC().Format(time.RFC3339)))
}

// stillHolding: the observation still finds what the pod was evicted for in
// its cgroup: processes and memory (memory, PIDs, a stall), or its
// ephemeral storage (disk).
func stillHolding(v *view, e inflight.Entry) bool {
	ps := v.podStats(e.UID)
	if ps == nil {
		return false
	}
	if e.Signal.Condition() == v1.NodeDiskPressure {
		return ps.EphemeralStorage != nil && ps.EphemeralStorage.UsedBytes != nil && *ps.EphemeralStorage.UsedBytes > 0
	}
	return ps.Memory != nil && ps.Memory.WorkingSetBytes != nil && *ps.Memory.WorkingSetBytes > 0 && hasProcesses(ps)
}

// released ends an episode's wait for a victim with no usage figure: the
// next eviction waits for an observation newer than this.
func (l *Loop) released(uid types.UID, at time.Time) {
	for _, ep := range l.episodes.All() {
		if ep.UnknownReclaim == uid {
			ep.UnknownReclaim = ""
			ep.FreshAfter = at
		}
	}
}

// memoryBack measures the lead time act-early plans with: from an accepted
// memory eviction to the observation that first finds the victim's cgroup
// removed or empty, which is when its memory is back. The pod object's
// deletion comes later (volume teardown, status sync) and would overstate it.
// Only hard victims are samples: act-early evicts for a hard threshold, with
// the hard grace; a soft victim drains for its own grace (30 s, minutes),
// and one such sample moved the lead from 2 s to 10 s, so that act-early
// then evicted several pods for a fall one would have covered.
func (l *Loop) memoryBack(v *view, entries []inflight.Entry) {
	for _, e := range entries {
		if ps := v.podStats(e.UID); ps != nil && hasProcesses(ps) {
			continue
		}
		if e.Origin != inflight.Evicted || !e.Hard || episode.Of(e.Signal) != episode.Memory || e.LastUsage[e.Signal] <= 0 {
			continue
		}
		if !e.MemoryGoneAt.IsZero() {
			continue
		}
		if _, first := l.inflight.MemoryGone(e.UID, v.obs.Time); !first && l.inflight.Contains(e.UID) {
			continue
		}
		took := v.obs.Time.Sub(e.Start)
		if took <= 0 {
			continue
		}
		lead := l.learned.lead.Sample(took)
		l.deps.Metrics.EvictionMemoryBack(e.Signal, took)
		l.deps.Log.Debug("evicted pod's memory back", zap.String("pod", e.Pod), zap.Duration("took", took), zap.Duration("lead", lead))
	}
}
