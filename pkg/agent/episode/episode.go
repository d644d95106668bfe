// SPDX-License-Identifier: Apache-2.0

// Package episode keeps a node's pressure episodes, one per resource
// (memory, the node filesystem, the image filesystem, PIDs). An episode
// starts when a threshold of its resource is met (or, for memory, its
// crossing is predicted) and ends when none has been for the pressure
// transition period. Everything that limits or explains evictions lives in
// the episode of the resource they relieve: the eviction cap and token
// bucket, the PodDisruptionBudget refusals, the back-off after a failed
// call, the calls under way, and the log and Event trail. So disk pressure
// that evictions cannot fix can use up only its own cap, and a hard memory
// threshold never waits behind anything another resource did.
//
// The package is pure state: the agent loop feeds it the time and what the
// thresholds say, and reads back what started and ended.
package episode

import (
	"fmt"
	"hash/fnv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Resource is what one episode is about.
type Resource string

// The resources, one episode each.
const (
	Memory Resource = "memory"
	// Stall is memory stall (the PSI signals): an episode of its own, so
	// that a thrashing node's evictions, one per stall window, neither
	// use up nor wait on memory.available's cap and calls.
	Stall Resource = "memory-stall"
	// MemoryHigh is containers stuck at memory.high (docs/memhigh.md):
	// their own memory, not the node's, so an episode of its own that
	// neither uses up nor waits on memory.available's.
	MemoryHigh Resource = "memory-high"
	NodeFs     Resource = "nodefs"
	ImageFs    Resource = "imagefs"
	PIDs       Resource = "pids"
)

// Resources lists every resource in action order: memory first, as the
// kubelet acts.
func Resources() []Resource { return []Resource{Memory, Stall, MemoryHigh, NodeFs, ImageFs, PIDs} }

// Of is the resource a signal measures.
func Of(s thresholds.Signal) Resource {
	switch s {
	case thresholds.MemoryAvailable, thresholds.AllocatableMemoryAvailable, thresholds.SwapAvailable:
		return Memory
	case thresholds.MemoryPressureSome, thresholds.MemoryPressureFull,
		thresholds.AllocatableMemoryPressureSome, thresholds.AllocatableMemoryPressureFull:
		return Stall
	case thresholds.MemoryHighStuck:
		return MemoryHigh
	case thresholds.NodeFsAvailable, thresholds.NodeFsInodesFree:
		return NodeFs
	case thresholds.ImageFsAvailable, thresholds.ImageFsInodesFree:
		return ImageFs
	case thresholds.PIDAvailable:
		return PIDs
	}
	return ""
}

// Lane is one of the two eviction calls an episode may have under way: a
// hard threshold's call never queues behind a soft one's.
type Lane int

// The lanes.
const (
	Soft Lane = iota
	Hard
)

// LaneOf is the lane of a call for a hard or soft threshold.
func LaneOf(hard bool) Lane {
	if hard {
		return Hard
	}
	return Soft
}

// Call is an eviction call under way.
type Call struct {
	Pod types.UID
	// Key is namespace/name, for logs.
	Key   string
	Start time.Time
	// Signal is the signal it relieves, Hard whether for a hard threshold,
	// and ReclaimBy when its grace period would end were it accepted now.
	Signal    thresholds.Signal
	Hard      bool
	ReclaimBy time.Time
}

// Episode is one resource's pressure episode.
type Episode struct {
	Resource Resource
	Start    time.Time
	// LastPressure is the last time a threshold of the resource was met,
	// waiting out its grace, acted on, or predicted.
	LastPressure time.Time
	// Budget is charged with every eviction made for the resource.
	Budget *evict.Budget

	// Calls holds the call under way in each lane, if any.
	Calls [2]*Call
	// Blocked are pods a PodDisruptionBudget protected in this episode:
	// when each may be asked again, how often it was refused, and in which
	// sweep.
	Blocked map[types.UID]Block
	// Sweep numbers the episode's passes over its candidates: a pod refused
	// in the current sweep is asked again only once every other candidate
	// has been asked (SweepDue), so a bounded number of calls reaches
	// every pod in turn, whatever their number.
	Sweep int
	// PDBStreak counts the PodDisruptionBudget refusals since the last
	// pause (or accepted eviction); PDBPause is the last pause and
	// PDBPauseUntil its end (PDBRefused).
	PDBStreak     int
	PDBPause      time.Duration
	PDBPauseUntil time.Time
	// CapReached: Budget's cap refused a call; no more evictions until the
	// episode ends.
	CapReached bool
	// RetryAt is when the token bucket has a token again.
	RetryAt time.Time
	// FailUntil and FailBackoff pace calls after a failed one.
	FailUntil   time.Time
	FailBackoff time.Duration
	// UnknownReclaim is a victim evicted with no usage figure, while it is
	// in flight: what it frees is unknown, not zero, so nothing more is
	// evicted for the resource until it is gone and a newer observation
	// shows what it gave back (FreshAfter).
	UnknownReclaim types.UID
	// UnknownReclaimHard: it was evicted for a hard threshold. A soft
	// victim with no usage figure defers only soft decisions: hard never
	// waits on soft (its grace may be minutes).
	UnknownReclaimHard bool
	FreshAfter         time.Time
	// ObservedFrom is the time of the observation the episode started
	// with: a disk decision waits for pod figures walked at or after it.
	ObservedFrom time.Time

	// The trail: what was already said in this episode.
	ThresholdsNoted map[string]bool
	EarlyNoted      map[thresholds.Signal]bool
	LastNone        string
	Evictions       int
}

// Busy reports whether a call of the lane is under way.
func (e *Episode) Busy(l Lane) bool { return e.Calls[l] != nil }

// Block is a pod's PodDisruptionBudget refusals in an episode.
type Block struct {
	Until    time.Time
	Refusals int
	// Sweep is the episode's sweep it was last refused in.
	Sweep int
}

// The pacing of PodDisruptionBudget refusals in an episode. A refusal
// frees nothing, and the next candidate is asked at once; but a node whose
// every pod a budget holds (single-replica workloads with minAvailable: 1
// are common) would otherwise ask each of its pods in turn, back to back,
// and a zone of such nodes under pressure multiplies that by every node.
// So after PDBProbes refusals in a row the episode pauses: PDBPauseFirst,
// doubling with each pause up to PDBPauseMax, spread by ±20 %. A node
// whose every pod is held then costs at most PDBProbes calls per pause:
// 12 in the first minute and 6 a minute after that, whatever the number of
// pods, while the first pod that may go among the first PDBProbes asked
// still goes at once.
const (
	PDBProbes     = 3
	PDBPauseFirst = 5 * time.Second
	PDBPauseMax   = time.Minute
)

// PDBRefused records a PodDisruptionBudget refusal of uid at at: the pod is
// asked again after recheck, doubled with each refusal in the episode up to
// 8×, and spread by ±20% per pod and refusal, and not before every other
// candidate has been asked in this sweep (SweepDue). Asked again all at
// once, N blocked pods were re-asked back to back every recheck, each
// answer starting a pass of its own.
//
// Every PDBProbes refusals in a row, the episode pauses (PDBPauseUntil);
// an accepted eviction ends the streak (Accepted).
func (e *Episode) PDBRefused(uid types.UID, at time.Time, recheck time.Duration) {
	b := e.Blocked[uid]
	b.Refusals++
	b.Sweep = e.Sweep
	d := recheck << min(b.Refusals-1, 3)
	b.Until = at.Add(time.Duration(float64(d) * spread(uid, b.Refusals)))
	e.Blocked[uid] = b
	e.PDBStreak++
	if e.PDBStreak < PDBProbes {
		return
	}
	e.PDBStreak = 0
	e.PDBPause = min(max(2*e.PDBPause, PDBPauseFirst), PDBPauseMax)
	// Spread by the pod refused last, whose UID no other node's pods
	// share: the nodes of a zone that came under pressure together do not
	// ask again together.
	e.PDBPauseUntil = at.Add(time.Duration(float64(e.PDBPause) * spread(uid, b.Refusals)))
}

// Accepted records an eviction accepted for the episode: the pods'
// budgets let one go, so the next refusals start a fresh streak.
func (e *Episode) Accepted() {
	e.PDBStreak, e.PDBPause, e.PDBPauseUntil = 0, 0, time.Time{}
}

// PDBPaused says, while the episode pauses after PDBProbes refusals in a
// row, why no other pod is asked yet; "" otherwise.
func (e *Episode) PDBPaused(now time.Time) string {
	if !now.Before(e.PDBPauseUntil) {
		return ""
	}
	return fmt.Sprintf("the last %d pods asked were refused by PodDisruptionBudgets: the next is asked at %s",
		PDBProbes, e.PDBPauseUntil.UTC().Format(time.RFC3339))
}

// SweepDue reports whether a new sweep may start at now: a pod refused in
// the current one is past its recheck. Asked once every candidate is
// held, so that each pod is asked again only after all the others were
// asked (a pod ranked first and held for good would otherwise take every
// call the pauses allow). It changes nothing: a plan asks it, the
// decision starts the sweep (StartSweep), and the explanation's plans
// never do.
func (e *Episode) SweepDue(now time.Time) bool {
	for _, b := range e.Blocked {
		if b.Sweep == e.Sweep && !now.Before(b.Until) {
			return true
		}
	}
	return false
}

// StartSweep starts the sweep SweepDue found due.
func (e *Episode) StartSweep() { e.Sweep++ }

// spread is a factor in [0.8, 1.2) fixed by the pod and the refusal count:
// no randomness, so a replay (a test, a log) is the same every time.
func spread(uid types.UID, n int) float64 {
	h := fnv.New32a()
	h.Write([]byte(uid))
	h.Write([]byte{byte(n)})
	return 0.8 + 0.4*float64(h.Sum32()%1000)/1000
}

// RetainBlocked forgets the PodDisruptionBudget records of pods no longer
// listed: an episode that never ends (a node that stays short) would
// otherwise keep one for every pod that ever passed through it.
func (e *Episode) RetainBlocked(listed func(types.UID) bool) {
	for uid := range e.Blocked {
		if !listed(uid) {
			delete(e.Blocked, uid)
		}
	}
}

// FreshBlocked returns the pods not to be asked again yet at now: within
// their recheck, or refused in the current sweep.
func (e *Episode) FreshBlocked(now time.Time) map[types.UID]bool {
	return e.freshBlocked(now, e.Sweep)
}

// NextSweepBlocked returns the pods not to be asked again yet at now once
// the next sweep has started: those within their recheck.
func (e *Episode) NextSweepBlocked(now time.Time) map[types.UID]bool {
	return e.freshBlocked(now, e.Sweep+1)
}

func (e *Episode) freshBlocked(now time.Time, sweep int) map[types.UID]bool {
	out := make(map[types.UID]bool, len(e.Blocked))
	for uid, b := range e.Blocked {
		if now.Before(b.Until) || b.Sweep == sweep {
			out[uid] = true
		}
	}
	return out
}

// Fresh returns the pods of since (a pod's UID, and when it was refused)
// whose refusal is younger than recheck. It changes nothing (Forget
// drops the older ones).
func Fresh(since map[types.UID]time.Time, now time.Time, recheck time.Duration) map[types.UID]bool {
	out := make(map[types.UID]bool, len(since))
	for uid, at := range since {
		if now.Sub(at) < recheck {
			out[uid] = true
		}
	}
	return out
}

// Forget drops the pods of since whose refusal is recheck old or older at
// now: Fresh leaves them out already, and a node that stays short would
// otherwise keep one for every pod ever refused.
func Forget(since map[types.UID]time.Time, now time.Time, recheck time.Duration) {
	for uid, at := range since {
		if now.Sub(at) >= recheck {
			delete(since, uid)
		}
	}
}

// Deferred says why no eviction call may be made for the episode now, or
// "". observed is the time of the observation a decision would act on;
// inFlight tells whether a pod is still in flight; hard, whether the
// decision is for a hard threshold. It changes nothing: the explanation's
// plans ask it too.
func (e *Episode) Deferred(now, observed time.Time, inFlight func(types.UID) bool, hard bool) string {
	if e.UnknownReclaim != "" && inFlight(e.UnknownReclaim) && (e.UnknownReclaimHard || !hard) {
		return "a victim with no usage figure is still going; what it frees is unknown"
	}
	switch {
	case e.CapReached:
		return "eviction cap for this pressure episode reached"
	case !observed.After(e.FreshAfter):
		return "waiting for an observation newer than the last victim's exit"
	case now.Before(e.RetryAt):
		return "rate limited"
	case now.Before(e.FailUntil):
		return "backing off after a failed eviction"
	}
	return ""
}

// ForgetUnknownReclaim forgets the victim with no usage figure once it is
// no longer in flight: Deferred holds nothing back for it from then on.
func (e *Episode) ForgetUnknownReclaim(inFlight func(types.UID) bool) {
	if e.UnknownReclaim != "" && !inFlight(e.UnknownReclaim) {
		e.UnknownReclaim = ""
	}
}

// Failed paces the next call after a failed one: the pause doubles from
// first up to most.
func (e *Episode) Failed(now time.Time, first, most time.Duration) {
	e.FailBackoff = min(max(2*e.FailBackoff, first), most)
	e.FailUntil = now.Add(e.FailBackoff)
}

// Tracker holds the episodes.
type Tracker struct {
	transition time.Duration
	newBudget  func() *evict.Budget
	episodes   map[Resource]*Episode
}

// NewTracker returns a tracker whose episodes end after transition without
// pressure; newBudget gives each new episode its budget.
func NewTracker(transition time.Duration, newBudget func() *evict.Budget) *Tracker {
	return &Tracker{transition: transition, newBudget: newBudget, episodes: map[Resource]*Episode{}}
}

// Update records which resources are under pressure at now and returns the
// episodes that started and those that ended (no pressure for the
// transition period; a zero period ends an episode at the first pass
// without pressure).
func (t *Tracker) Update(now time.Time, pressure map[Resource]bool) (started, ended []*Episode) {
	for _, r := range Resources() {
		e := t.episodes[r]
		switch {
		case pressure[r] && e == nil:
			e = &Episode{
				Resource: r, Start: now, LastPressure: now, Budget: t.newBudget(),
				Blocked: map[types.UID]Block{}, ThresholdsNoted: map[string]bool{}, EarlyNoted: map[thresholds.Signal]bool{},
			}
			t.episodes[r] = e
			started = append(started, e)
		case pressure[r]:
			e.LastPressure = now
		case e != nil && now.Sub(e.LastPressure) >= t.transition:
			delete(t.episodes, r)
			ended = append(ended, e)
		}
	}
	return started, ended
}

// Get returns the resource's episode, or nil.
func (t *Tracker) Get(r Resource) *Episode { return t.episodes[r] }

// All returns the episodes under way, in action order.
func (t *Tracker) All() []*Episode {
	var out []*Episode
	for _, r := range Resources() {
		if e := t.episodes[r]; e != nil {
			out = append(out, e)
		}
	}
	return out
}
