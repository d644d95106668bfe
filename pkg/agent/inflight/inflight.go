// SPDX-License-Identifier: Apache-2.0

// Package inflight keeps the pods whose resources are on their way back:
// pods evictd evicted (or, in dry run, would have) and pods it found already
// terminating, also after a restart. Until such a pod is gone, its usage
// counts as reclaim in flight, so the agent does not evict a second pod for
// pressure the first one will relieve.
//
// A pod that outlives its grace period still counts while the kubelet is
// visibly tearing it down: each observation in which its figures fall (its
// memory, its disk usage as its volumes are removed) or its status moves (a
// container stops, its phase changes) keeps it counting for GoneTimeout
// more, up to TeardownCap past its grace period. One that shows no such
// progress for GoneTimeout is stuck, as one held by a finalizer or a runtime
// that cannot stop it is, and stops counting.
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
	// It is Due, or later while the pod's teardown moves (Moved).
	Expires time.Time
	// Due is when the entry stops counting if its teardown shows no
	// progress: GoneTimeout past ReclaimBy (VanishedTimeout past Start for
	// Vanished); zero for DryRun.
	Due time.Time
	// Moved is the latest observation in which the pod's teardown made
	// progress (zero: none seen): a figure of its fell by a step, or its
	// status moved. Past Due, the entry counts until GoneTimeout after it,
	// and never past TeardownCap after ReclaimBy.
	Moved time.Time
	// Prolonged is when the entry first counted past Due because its
	// teardown moved (zero: never): the caller reports it once.
	Prolonged time.Time
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
	// status is the pod's teardown as its object last showed it, and marks
	// each figure's level at the last progress: what the next progress is
	// measured from.
	status teardown
	marks  map[figure]mark
}

// teardown is how far the kubelet has taken a pod down, as its object says.
type teardown struct {
	phase v1.PodPhase
	// stopped is how many of its containers have terminated.
	stopped int
}

func teardownOf(p *v1.Pod) teardown {
	t := teardown{phase: p.Status.Phase}
	for _, ss := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, c := range ss {
			if c.State.Terminated != nil {
				t.stopped++
			}
		}
	}
	return t
}

// movedFrom: the kubelet took the pod further down since was: a container
// stopped, or its phase became Succeeded or Failed (the kubelet writes it
// once its containers are done, before it removes the volumes).
// Conditions are left out: the kubelet rewrites Ready on its own probes,
// stuck or not.
func (t teardown) movedFrom(was teardown) bool {
	return t.stopped > was.stopped || (isTerminal(t.phase) && !isTerminal(was.phase))
}

func isTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// mark is one figure's level at its last progress, and the largest seen:
// progress is a fall of at least ProgressShare of the largest since the
// mark, so that the jitter of a stuck pod's working set, or a walk that
// varies by a few files, is not taken for a teardown.
type mark struct {
	level, high int64
}

// ProgressShare is the fall of a figure, as a share of the largest seen,
// that counts as progress: 1/20. A teardown that frees less than that in
// GoneTimeout (30 s) would take over ten minutes, past TeardownCap: as good
// as stuck.
const ProgressShare = 20

// note takes a new value of the figure and reports whether it fell by a
// step since the mark (the mark then moves to it).
func (m *mark) note(v int64) bool {
	if v > m.high {
		m.high = v
	}
	step := max(m.high/ProgressShare, 1)
	if m.level-v >= step {
		m.level = v
		return true
	}
	if v > m.level {
		// It grew (the pod still writes, or a walk cut short before): the
		// fall to come is measured from here.
		m.level = v
	}
	return false
}

// Options configure a Set.
type Options struct {
	// GoneTimeout is how long past ReclaimBy an entry keeps counting.
	// The kubelet itself waits 30 s for a pod's cleanup before evicting again.
	GoneTimeout time.Duration
	// VanishedTimeout is how long a pod whose eviction answered 404 counts.
	VanishedTimeout time.Duration
	// TeardownCap is how long past ReclaimBy an entry may keep counting
	// while its teardown moves; 0: not at all past GoneTimeout. A slow disk
	// removing a victim's volume file by file (18,000 files in minutes on a
	// busy node) is reclaim on its way, not a lost bet; the cap bounds what
	// a pod can hold back by releasing a little at a time.
	TeardownCap time.Duration
}

// DefaultOptions are the defaults of the agent.
func DefaultOptions() Options {
	return Options{GoneTimeout: 30 * time.Second, VanishedTimeout: 10 * time.Second, TeardownCap: 5 * time.Minute}
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
		status:     teardownOf(a.Pod),
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
		e.Due = a.At.Add(s.opts.VanishedTimeout)
	default:
		e.Due = e.ReclaimBy.Add(s.opts.GoneTimeout)
	}
	s.settle(e)
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
//
// A listed pod whose status moved since the last Sync (a container stopped,
// its phase changed) made progress at now. An entry that counts at now past
// its Due for the first time gets Prolonged = now.
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
			e.Due = e.Deletion.Add(s.opts.GoneTimeout)
			s.settle(e)
		}
		if st := teardownOf(p); st != e.status {
			if st.movedFrom(e.status) {
				s.moved(e, now)
			}
			e.status = st
		}
		if !e.Expires.IsZero() && !now.Before(e.Expires) {
			expired = append(expired, *e)
			delete(s.entries, uid)
			s.stuck[uid] = true
			continue
		}
		if !e.Due.IsZero() && !now.Before(e.Due) && e.Prolonged.IsZero() {
			e.Prolonged = now
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
		e := &Entry{
			UID: uid, Pod: p.Namespace + "/" + p.Name, Namespace: p.Namespace, Name: p.Name, Origin: Terminating,
			Start: start, ReclaimBy: by, Due: exp.Add(s.opts.GoneTimeout), Deletion: by,
			LastUsage: map[thresholds.Signal]int64{}, MemorySeen: -1,
			status: teardownOf(p),
		}
		s.settle(e)
		s.entries[uid] = e
	}
	sortEntries(gone)
	sortEntries(expired)
	return gone, expired
}

// moved records that e's teardown made progress at t, and moves its expiry.
func (s *Set) moved(e *Entry, t time.Time) {
	if t.After(e.Moved) {
		e.Moved = t
		s.settle(e)
	}
}

// settle sets e.Expires from its Due and its last progress: GoneTimeout
// after the progress, within TeardownCap after ReclaimBy, never before Due.
func (s *Set) settle(e *Entry) {
	e.Expires = e.Due
	if e.Due.IsZero() || e.Moved.IsZero() {
		return
	}
	until := e.Moved.Add(s.opts.GoneTimeout)
	if limit := e.ReclaimBy.Add(s.opts.TeardownCap); until.After(limit) {
		until = limit
	}
	if until.After(e.Expires) {
		e.Expires = until
	}
}

func isFinished(p *v1.Pod) bool { return isTerminal(p.Status.Phase) }

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
// new observation at t: workingSet(uid) returns it, with false when the
// observation has no figure for the pod. A pod with a figure before and none
// now has left its cgroup: 0. What fell since the previous observation is
// MemoryReleased until the next one; a pod never measured releases nothing.
// A fall by a step since the last progress is progress of its teardown.
func (s *Set) NoteMemory(workingSet func(types.UID) (int64, bool), t time.Time) {
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
		s.noteFigure(e, memoryFigure, now, t)
	}
}

// figure names one of the figures of a pod a teardown is followed by.
type figure string

const (
	memoryFigure figure = "memory working set"
	diskBytes    figure = "ephemeral storage bytes"
	diskInodes   figure = "ephemeral storage inodes"
)

// noteFigure takes a new value of one of e's figures at t.
func (s *Set) noteFigure(e *Entry, key figure, v int64, t time.Time) {
	m, ok := e.marks[key]
	if !ok {
		if e.marks == nil {
			e.marks = map[figure]mark{}
		}
		e.marks[key] = mark{level: v, high: v}
		return
	}
	if m.note(v) {
		s.moved(e, t)
	}
	e.marks[key] = m
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

// NoteDisk records, for every pod in flight, its ephemeral storage in a new
// observation at t: usage(uid) returns its bytes and inodes, with false when
// the observation has no figure for the pod. A fall of either by a step
// since the last progress is progress of its teardown (its volumes and
// logs going), whatever it was evicted for and whether or not an episode
// still ranks the pods.
func (s *Set) NoteDisk(usage func(types.UID) (bytes, inodes int64, ok bool), t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, e := range s.entries {
		if b, n, ok := usage(uid); ok {
			s.noteFigure(e, diskBytes, b, t)
			s.noteFigure(e, diskInodes, n, t)
		}
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
		c.marks = nil // the set's own
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
