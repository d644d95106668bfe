// SPDX-License-Identifier: Apache-2.0

package family

import (
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/stall"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Config is what the families are built from.
type Config struct {
	Thresholds []thresholds.Threshold
	// StallWindow is the window of the stall signals' shares (0:
	// config.DefaultStallWindow).
	StallWindow time.Duration
	// MemoryHigh are the memory.high family's thresholds; none: no family.
	MemoryHigh memhigh.Thresholds
	// Pods names the memory.high family's containers in its metrics.
	Pods    func() []*v1.Pod
	Metrics *metrics.Metrics
	// Relax is the memory.high family's stage 1 (nil: none); Protected
	// says why a pod is never evicted ("" when it may be), and stage 1
	// writes to none of those (nil: every pod may be).
	Relax     Relaxer
	Protected func(*v1.Pod) string
}

// Configured are the families the thresholds name: stall with a stall
// threshold, memory.high with a memory.high threshold. A family without a threshold is not built at all, so it reads
// nothing and reports nothing.
func Configured(c Config) []Family {
	var out []Family
	if s := NewStall(c.Thresholds, c.StallWindow); s != nil {
		out = append(out, s)
	}
	if m := NewMemHigh(c.MemoryHigh, nil, c.Pods, c.Metrics, c.Relax); m != nil {
		out = append(out, m.Protect(c.Protected))
	}
	return out
}

// Stall is the memory stall family (docs/stall.md): the node's and
// kubepods' memory PSI as the stall signals, the pods' own PSI to pick a
// victim in the stall, and one victim per window.
type Stall struct {
	window  time.Duration
	tracker *stall.Tracker
	// signals are the stall signals the thresholds name, in their order.
	signals []thresholds.Signal
	// pods are the pods' own stall shares in the last observation.
	pods map[string]rank.PodStall
	// blind are the groups (node, kubepods) whose memory PSI the last
	// observation could not read.
	blind map[string]bool
	// settleUntil is when the latest stall victim's effect is in a whole
	// window (decide.Input.StallSettling); goneUntil the same for the
	// victims that went (decide.Input.StallGoneRecently).
	settleUntil, goneUntil time.Time
}

// NewStall returns the stall family of ths over window (0:
// config.DefaultStallWindow), or nil when no threshold is on a stall signal:
// the pods' shares are only ever used to pick a stall victim.
func NewStall(ths []thresholds.Threshold, window time.Duration) *Stall {
	if window <= 0 {
		window = config.DefaultStallWindow
	}
	f := &Stall{window: window, tracker: stall.New(window)}
	seen := map[thresholds.Signal]bool{}
	for _, th := range ths {
		if s := th.Signal; s.Stall() && !seen[s] {
			seen[s] = true
			f.signals = append(f.signals, s)
		}
	}
	if len(f.signals) == 0 {
		return nil
	}
	return f
}

// Name implements Family.
func (f *Stall) Name() string { return "stall" }

// Observe feeds the tracker the observation's PSI totals (the node's,
// kubepods' and each pod's memory.pressure). A stall signal whose group has
// no memory PSI (PSI off at boot, psi=0, or its file unreadable) is
// Unreadable: evictd is blind to that stall, which must be said rather than
// read as no stall.
func (f *Stall) Observe(obs *pressure.Observation, now time.Time) error {
	f.pods = nil
	if obs.Summary == nil {
		return nil
	}
	at := func(m *statsapi.MemoryStats) time.Time {
		if m.Time.IsZero() {
			return now
		}
		return m.Time.Time
	}
	has := map[string]bool{}
	n := &obs.Summary.Node
	if n.Memory != nil {
		f.tracker.Add(stall.Node, at(n.Memory), n.Memory.PSI)
		has[stall.Node] = n.Memory.PSI != nil
	}
	for i := range n.SystemContainers {
		if c := &n.SystemContainers[i]; c.Name == statsapi.SystemContainerPods && c.Memory != nil {
			f.tracker.Add(stall.Kubepods, at(c.Memory), c.Memory.PSI)
			has[stall.Kubepods] = has[stall.Kubepods] || c.Memory.PSI != nil
		}
	}
	seen := map[string]bool{stall.Node: true, stall.Kubepods: true}
	f.pods = make(map[string]rank.PodStall, len(obs.Summary.Pods))
	for i := range obs.Summary.Pods {
		ps := &obs.Summary.Pods[i]
		if ps.Memory == nil || ps.Memory.PSI == nil || ps.PodRef.UID == "" {
			continue
		}
		g := stall.PodGroup(ps.PodRef.UID)
		seen[g] = true
		f.tracker.Add(g, at(ps.Memory), ps.Memory.PSI)
		if sh, ok := f.tracker.Share(g); ok {
			f.pods[ps.PodRef.UID] = rank.PodStall{Some: sh.Some, Full: sh.Full}
		}
	}
	f.tracker.Retain(func(g string) bool { return seen[g] })
	if f.blind == nil {
		f.blind = make(map[string]bool, 2)
	}
	f.blind[stall.Node], f.blind[stall.Kubepods] = !has[stall.Node], !has[stall.Kubepods]

	var lost []pressure.SignalError
	for _, s := range f.signals {
		if has[stall.GroupOf(s)] {
			continue
		}
		path := "/proc/pressure/memory"
		if stall.GroupOf(s) == stall.Kubepods {
			path = "kubepods/memory.pressure"
		}
		lost = append(lost, pressure.SignalError{Signal: string(s), Path: path,
			Err: errors.New("no memory PSI figure (PSI off at boot, or the file unreadable)")})
	}
	if len(lost) == 0 {
		return nil
	}
	return &Unreadable{Why: "a stall threshold cannot be evaluated: no memory PSI figure", Signals: lost}
}

// Assess implements Family: the stall signals of the node and kubepods.
// A group whose PSI the last observation could not read has none: its last
// share, however old, would keep a threshold met and its episode on for as
// long as evictd is blind, where any other unreadable signal ends it.
func (f *Stall) Assess(signals map[thresholds.Signal]thresholds.Observation) {
	for s, o := range f.tracker.Observations() {
		if !f.blind[stall.GroupOf(s)] {
			signals[s] = o
		}
	}
}

// Targets ranks the pods for a stall signal in the kubelet's memory order,
// those whose own stall share over the window is too small ineligible.
func (f *Stall) Targets(s thresholds.Signal, summary *statsapi.Summary, pods []*v1.Pod, opts rank.Options) ([]rank.Candidate, bool) {
	if !s.Stall() {
		return nil, false
	}
	opts.PodStall = f.pods
	return rank.Rank(s, summary, pods, opts).Candidates, true
}

// Settle reports whether a memory victim (evicted for a stall or for
// memory.available and its kin) is still going or went less than a stall
// window ago: until then the window's share still holds the stall from
// before it went, and a second victim would be one too many. A victim for
// memory.available settles the stall too: it frees the memory whose
// shortage the stall is, and before, the two signals each evicted a pod
// for one shortfall.
//
// It only reads: the explanation plans every resource with it, as a
// decision does, and what it shows must not move the window a later
// decision reads (Note moves it, for the decisions alone).
func (f *Stall) Settle(in *decide.Input) {
	in.StallSettling = settling(in.InFlight) || in.Now.Before(f.settleUntil)
	in.StallGoneRecently = in.Now.Before(f.goneUntil)
}

// Note implements Family: a decision saw the victims in flight at in.Now,
// and the stall settles for a whole window after the last decision that
// saw one of them. Only a decision sees a call under way that is then
// refused: the explanation, which plans after the pass's calls went out,
// would otherwise put the stall's victim off by a window for an eviction
// that freed nothing.
func (f *Stall) Note(in decide.Input) {
	if settling(in.InFlight) {
		f.settleFrom(in.Now)
	}
}

// settling reports whether a victim among entries settles the stall.
func settling(entries []inflight.Entry) bool {
	for _, e := range entries {
		if decide.SettlesStall(e) {
			return true
		}
	}
	return false
}

// Gone implements Family: a memory victim gone at at settles the stall for
// a whole window after.
func (f *Stall) Gone(e inflight.Entry, at time.Time) {
	if decide.SettlesStall(e) {
		f.settleFrom(at)
		if u := at.Add(f.window); u.After(f.goneUntil) {
			f.goneUntil = u
		}
	}
}

// settleFrom notes a stall victim still there (or gone) at t: no second
// one before a whole window after t.
func (f *Stall) settleFrom(t time.Time) {
	if u := t.Add(f.window); u.After(f.settleUntil) {
		f.settleUntil = u
	}
}
