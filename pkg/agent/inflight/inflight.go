// SPDX-License-Identifier: Apache-2.0

// Package inflight keeps the pods whose resources are on their way back:
// pods evictd evicted (or, in dry run, would have) and pods it found already
// terminating, also after a restart. Until such a pod is gone, its usage
// counts as reclaim in flight, so the agent does not evict a second pod for
// pressure the first one will relieve.
//
// The set only records; what an entry is worth for a signal is decided by the
// caller (pkg/agent/decide) from the entry and the pod's current usage.
package inflight

import (
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/thresholds"
)

// Origin says how a pod came to be in flight.
type Origin string

const (
	// Evicted: this evictd's eviction (or forced delete) was accepted.
	Evicted Origin = "evicted"
	// DryRun: this evictd would have evicted it (--dry-run); the pod stays,
	// so the entry lasts until the pressure episode ends.
	DryRun Origin = "dry-run"
	// Terminating: the pod already had a deletionTimestamp when seen
	// (evicted by someone else, deleted by a user, or by an earlier evictd).
	Terminating Origin = "terminating"
	// Vanished: the eviction answered 404; the pod is going or gone.
	Vanished Origin = "vanished"
	// Pending: an eviction call is under way, not answered yet. Never in a
	// Set: the agent adds such entries to a decision's view of what is in
	// flight, so that no episode calls for the same pod again, nor evicts
	// another for what that pod will free.
	Pending Origin = "pending"
)

// Entry is one pod in flight.
type Entry struct {
	UID types.UID
	// Pod is namespace/name, for logs.
	Pod             string
	Namespace, Name string
	Origin          Origin
	// Signal is the signal it was evicted for; empty for Terminating.
	Signal thresholds.Signal
	// Hard: evicted for a hard threshold, with the hard grace period.
	Hard bool
	// Start is when the eviction was accepted or the deletion requested.
	Start time.Time
	// ReclaimBy is the latest time its resources are expected back: the end
	// of its grace period, after which the kubelet kills it.
	ReclaimBy time.Time
	// Expires is when the entry stops counting even though the pod is not
	// gone (a stuck termination must not block evictions forever); zero
	// means only the end of the episode or the pod's deletion removes it.
	Expires time.Time
	// LastUsage is the pod's last known usage per signal, for signals whose
	// resources outlive the pod's cgroup (disk: the kubelet removes volumes
	// and logs before the pod object goes).
	LastUsage map[thresholds.Signal]int64
	// MemoryGoneAt is when an observation first found the pod's cgroup gone
	// or empty (zero until then).
	MemoryGoneAt time.Time
	// MemorySeen is the pod's memory working set in the latest observation
	// (0 once its cgroup is gone; -1 while unknown), and MemoryReleased what
	// it gave back since the observation before. An observation reads the
	// node before the pods, so memory freed in between is missing from both
	// of its figures: it still counts as reclaim in flight for that one
	// observation (see NoteMemory).
	MemorySeen     int64
	MemoryReleased int64
	// ObjectGone: the pod's object left the API (a force delete) while its
	// processes still held memory; its cgroup now says what it still holds
	// (MemorySeen), until they are gone too.
	ObjectGone bool
	// Deletion is the pod object's deletionTimestamp last taken in (zero
	// while it has none): when it moves, the API server's deadline replaces
	// ReclaimBy (see Sync).
	Deletion time.Time
}

// Options configure a Set.
type Options struct {
	// GoneTimeout is how long past ReclaimBy an entry keeps counting.
	// The kubelet itself waits 30 s for a pod's cleanup before evicting again.
	GoneTimeout time.Duration
	// VanishedTimeout is how long a pod whose eviction answered 404 counts.
	VanishedTimeout time.Duration
}

// DefaultOptions are the defaults of the agent.
func DefaultOptions() Options {
	return Options{GoneTimeout: 30 * time.Second, VanishedTimeout: 10 * time.Second}
}

// Set is the pods in flight, keyed by UID. It is safe for concurrent use:
// the agent loop adds and reads, the pod informer's handlers remove.
type Set struct {
	opts    Options
	mu      sync.Mutex
	entries map[types.UID]*Entry
	// stuck holds the pods whose entry expired while they were still
	// listed: they do not come back as Terminating, or a pod held by a
	// finalizer or a hung runtime would count as reclaim for ever.
	stuck map[types.UID]bool
}

// New returns an empty set.
func New(opts Options) *Set {
	return &Set{opts: opts, entries: map[types.UID]*Entry{}, stuck: map[types.UID]bool{}}
}

// Added is what the agent knows about an eviction it just made.
type Added struct {
	Pod    *v1.Pod
	Origin Origin
	Signal thresholds.Signal
	// Hard: for a hard threshold (the hard grace period).
	Hard bool
	// At is when the API server accepted it (or answered, for DryRun and
	// Vanished).
	At time.Time
	// GraceSeconds is the grace period sent.
	GraceSeconds int64
	// Usage is the pod's usage of Signal's resource when evicted.
	Usage int64
}

// Add records an accepted (or would-be) eviction; it replaces any entry of
// the same pod.
func (s *Set) Add(a Added) Entry {
	e := &Entry{
		UID:        a.Pod.UID,
		Pod:        a.Pod.Namespace + "/" + a.Pod.Name,
		Namespace:  a.Pod.Namespace,
		Name:       a.Pod.Name,
		Origin:     a.Origin,
		Signal:     a.Signal,
		Hard:       a.Hard,
		Start:      a.At,
		ReclaimBy:  a.At.Add(time.Duration(a.GraceSeconds) * time.Second),
		LastUsage:  map[thresholds.Signal]int64{a.Signal: a.Usage},
		MemorySeen: -1,
	}
	if dt := a.Pod.DeletionTimestamp; dt != nil {
		// The deletion the call started from: an informer still showing it
		// must not take the new, shorter deadline back.
		e.Deletion = dt.Time
	}
	if isMemory(a.Signal) {
		e.MemorySeen = a.Usage
	}
	switch a.Origin {
	case DryRun:
		// Never goes: counts for the rest of the episode.
	case Vanished:
		e.Expires = a.At.Add(s.opts.VanishedTimeout)
	default:
		e.Expires = e.ReclaimBy.Add(s.opts.GoneTimeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[e.UID] = e
	return *e
}

// Sync reconciles the set with the pods the informer holds at now: pods
// with a deletionTimestamp join as Terminating (this is how evictd finds,
// after a restart, the pods an earlier run evicted); entries whose pod is
// no longer listed are removed and returned (they are gone; the delete
// event may have been missed); expired entries are removed and returned
// too, separately, and their pods never join again while they are listed
// (they are stuck: their usage is back in the observation, not on its way).
//
// An evicted pod's deadline is the API server's, once its object shows a
// new deletionTimestamp: the grace evictd asked for is not what the pod
// got when a responder deleted it with its own, or when the API server
// kept an earlier, shorter deletion; the entry's guess would then count a
// pod draining for minutes as reclaim within a hard threshold's horizon.
func (s *Set) Sync(pods []*v1.Pod, now time.Time) (gone, expired []Entry) {
	listed := make(map[types.UID]*v1.Pod, len(pods))
	for _, p := range pods {
		listed[p.UID] = p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, e := range s.entries {
		p, ok := listed[uid]
		if !ok {
			gone = append(gone, *e)
			delete(s.entries, uid)
			continue
		}
		if e.Origin == Evicted && p.DeletionTimestamp != nil && !p.DeletionTimestamp.Time.Equal(e.Deletion) {
			e.Deletion = p.DeletionTimestamp.Time
			e.ReclaimBy = e.Deletion
			e.Expires = e.Deletion.Add(s.opts.GoneTimeout)
		}
		if !e.Expires.IsZero() && !now.Before(e.Expires) {
			expired = append(expired, *e)
			delete(s.entries, uid)
			s.stuck[uid] = true
		}
	}
	for uid := range s.stuck {
		if _, ok := listed[uid]; !ok {
			delete(s.stuck, uid)
		}
	}
	for uid, p := range listed {
		if p.DeletionTimestamp == nil || s.stuck[uid] {
			continue
		}
		if _, ok := s.entries[uid]; ok {
			continue
		}
		if isFinished(p) {
			continue // nothing left to reclaim
		}
		// The API server sets deletionTimestamp to the time of the request
		// plus the grace period: the moment the kubelet kills.
		by := p.DeletionTimestamp.Time
		var grace int64
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		start := by.Add(-time.Duration(grace) * time.Second)
		// A pod found long past its deadline (evictd restarted, or the
		// node's clock is behind) still gets one GoneTimeout to go.
		exp := by
		if exp.Before(now) {
			exp = now
		}
		s.entries[uid] = &Entry{
			UID: uid, Pod: p.Namespace + "/" + p.Name, Namespace: p.Namespace, Name: p.Name, Origin: Terminating,
			Start: start, ReclaimBy: by, Expires: exp.Add(s.opts.GoneTimeout), Deletion: by,
			LastUsage: map[thresholds.Signal]int64{}, MemorySeen: -1,
		}
	}
	sortEntries(gone)
	sortEntries(expired)
	return gone, expired
}

func isFinished(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// Gone removes the pod's entry (its deletion was seen) and returns it.
func (s *Set) Gone(uid types.UID) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[uid]
	if !ok {
		return Entry{}, false
	}
	delete(s.entries, uid)
	return *e, true
}

// Keep puts back an entry whose pod object is gone but whose processes
// still run, marked ObjectGone.
func (s *Set) Keep(e Entry) {
	e.ObjectGone = true
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[e.UID] = &e
}

// MemoryGone records that an observation at t found the pod's cgroup gone
// or empty, and returns the entry the first time (false after that, or when
// the pod is not in flight).
func (s *Set) MemoryGone(uid types.UID, t time.Time) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[uid]
	if !ok || !e.MemoryGoneAt.IsZero() {
		return Entry{}, false
	}
	e.MemoryGoneAt = t
	return *e, true
}

// NoteMemory records, for every pod in flight, its memory working set in a
// new observation: workingSet(uid) returns it, with false when the
// observation has no figure for the pod. A pod with a figure before and none
// now has left its cgroup: 0. What fell since the previous observation is
// MemoryReleased until the next one; a pod never measured releases nothing.
func (s *Set) NoteMemory(workingSet func(types.UID) (int64, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, e := range s.entries {
		now, ok := workingSet(uid)
		if !ok {
			if e.MemorySeen < 0 {
				continue
			}
			now = 0
		}
		e.MemoryReleased = 0
		if e.MemorySeen > now {
			e.MemoryReleased = e.MemorySeen - now
		}
		e.MemorySeen = now
	}
}

// Stuck reports whether the pod outlived its entry.
func (s *Set) Stuck(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stuck[uid]
}

// NoteUsage records the pod's usage of a signal's resource, for the signals
// whose resources outlive the pod's cgroup (disk): the largest figure seen.
// A victim's files are freed only as the kubelet removes its volumes; a
// smaller figure before that is a walk cut short by its budget or racing the
// removal, and taking it would free the need for a second eviction (seen on
// the real node). Errs toward evicting less, until the pod is gone.
func (s *Set) NoteUsage(uid types.UID, sig thresholds.Signal, usage int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[uid]; ok && usage > e.LastUsage[sig] {
		e.LastUsage[sig] = usage
	}
}

// EndEpisode removes the dry-run entries made for the signals of an episode
// that ended: those pods were never evicted, and the next episode must be
// free to name them again.
func (s *Set) EndEpisode(of func(thresholds.Signal) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, e := range s.entries {
		if e.Origin == DryRun && of(e.Signal) {
			delete(s.entries, uid)
		}
	}
}

// Contains reports whether the pod is in flight.
func (s *Set) Contains(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.entries[uid]
	return ok
}

// Len is the number of pods in flight.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Snapshot returns a copy of every entry, ordered by start time then pod.
func (s *Set) Snapshot() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Entry, 0, len(s.entries))
	for _, e := range s.entries {
		c := *e
		c.LastUsage = make(map[thresholds.Signal]int64, len(e.LastUsage))
		for k, v := range e.LastUsage {
			c.LastUsage[k] = v
		}
		out = append(out, c)
	}
	sortEntries(out)
	return out
}

func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		if !es[i].Start.Equal(es[j].Start) {
			return es[i].Start.Before(es[j].Start)
		}
		return es[i].Pod < es[j].Pod
	})
}

func isMemory(s thresholds.Signal) bool {
	return s == thresholds.MemoryAvailable || s == thresholds.AllocatableMemoryAvailable
}
