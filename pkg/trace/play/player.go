// SPDX-License-Identifier: Apache-2.0

// Package play replays a trace (pkg/trace) to the agent's loop: its Player
// is the loop's observer, waker, pod source, evictor and call runner, and
// hands each pass the recorded observation, pod list, clock readings and
// eviction answers, at the points of the pass the recorded agent took them.
package play

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// Player feeds a loop the trace's passes: it is the loop's observer,
// waker, pod source, evictor and call runner in a replay
// (agent.Deps.Replay). Its caller drives the passes: Begin each, tell the
// loop the deletions, Start, run the loop's Step, then Finish.
type Player struct {
	tr    *trace.Trace
	evict evict.Options
	// clk is the pass's clock: its start, its observation's end, each
	// answer's and deletion's time. played is what the loop decides with.
	clk    *testclock.FakeClock
	played playedClock
	idx    int
	cur    *trace.Pass
	pods   *trace.Pods
	// answers are the recorded calls by number, due when (pass index and
	// drain point) the recorded agent took each answer.
	answers map[uint64]trace.Call
	due     map[[2]int][]uint64
	// seq counts the replay's calls; queued are those not answered yet,
	// unrecorded those the recorded agent did not answer within the
	// trace, answered at the next pass's start.
	seq        uint64
	queued     map[uint64]func()
	launchedAt map[uint64]time.Time
	// launchedPass is the pass that made each call.
	launchedPass map[uint64]uint64
	unrecorded   []uint64
	running      uint64
	made         []Call
}

// New is a player of tr's passes, answering the calls the recorded agent
// did not make as eo would (an accepted eviction, a dry run's verdict in
// dry run).
func New(tr *trace.Trace, eo evict.Options) *Player {
	p := &Player{tr: tr, evict: eo, clk: testclock.NewFakeClock(tr.Passes[0].At), answers: map[uint64]trace.Call{},
		due: map[[2]int][]uint64{}, queued: map[uint64]func(){}, launchedAt: map[uint64]time.Time{},
		launchedPass: map[uint64]uint64{}}
	p.played.pass = p.clk
	p.seq = tr.Passes[0].Calls
	for i, pass := range tr.Passes {
		for _, d := range pass.Drains {
			for _, c := range d.Calls {
				p.answers[c.Seq] = c
				p.due[[2]int{i, d.Point}] = append(p.due[[2]int{i, d.Point}], c.Seq)
			}
		}
	}
	return p
}

// Launch is the loop's call runner (agent.Deps.Go): the call waits for its
// answer's turn.
func (p *Player) Launch(f func()) {
	p.seq++
	p.queued[p.seq] = f
	// The launch's time is the loop's last reading (launch's).
	p.launchedAt[p.seq], p.launchedPass[p.seq] = p.played.last, p.cur.N
	if rec, ok := p.answers[p.seq]; !ok || rec.Pass != p.cur.N {
		// Not the recorded agent's call of that number (one made in
		// another pass, or none): its answer does not wait for the
		// recorded one's.
		delete(p.answers, p.seq)
		p.unrecorded = append(p.unrecorded, p.seq)
	}
}

// playedClock is the clock a replayed pass decides with: the readings the
// recorded agent took in that pass, handed back in order, so that a rate
// limit, a back-off or a deadline checked at a reading comes out as it did
// for the agent, however long its pass took. Past them (a replay that
// reads the clock more often than the agent did: it decided otherwise),
// and in a trace older than the readings, it is the pass's clock, never
// behind the last reading handed out.
type playedClock struct {
	pass *testclock.FakeClock
	// has: the trace keeps readings (format 4 on), readings the pass's.
	has      bool
	readings []time.Time
	next     int
	// more: the pass read the clock past its readings; taken counts the
	// readings it took.
	more  bool
	taken int
	last  time.Time
}

// begin starts pass p, with its readings when has (the trace's format
// keeps them).
func (c *playedClock) begin(p *trace.Pass, has bool) {
	c.has, c.readings, c.next, c.more, c.taken, c.last = has, nil, 0, false, 0, time.Time{}
	if has {
		c.readings = p.ReadingTimes()
	}
}

// diverged reports whether the pass took other readings than recorded:
// more, or fewer.
func (c *playedClock) diverged() bool {
	return c.has && (c.more || c.next != len(c.readings))
}

func (c *playedClock) Now() time.Time {
	c.taken++
	t := c.pass.Now()
	switch {
	case c.next < len(c.readings):
		t = c.readings[c.next]
		c.next++
	case c.has:
		c.more = true
		fallthrough
	default:
		if t.Before(c.last) {
			t = c.last
		}
	}
	c.last = t
	return t
}

func (c *playedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// BeforeDrain runs, before the loop's drain at point of the current pass,
// the calls whose answers the recorded agent took there, on the clock of
// each answer; at a pass's start, also those it never answered.
func (p *Player) BeforeDrain(point int) {
	now := p.clk.Now()
	defer p.clk.SetTime(now)
	for _, seq := range p.due[[2]int{p.idx, point}] {
		rec, recorded := p.answers[seq]
		if f, ok := p.queued[seq]; ok && recorded {
			p.clk.SetTime(rec.At)
			p.run(seq, f)
		}
	}
	if point != 0 {
		return
	}
	for _, seq := range p.unrecorded {
		if f, ok := p.queued[seq]; ok {
			p.run(seq, f)
		}
	}
	p.unrecorded = p.unrecorded[:0]
}

func (p *Player) run(seq uint64, f func()) {
	delete(p.queued, seq)
	p.running = seq
	f()
	p.running = 0
}

// FirstCall is the number of the last call made before the trace began.
func (p *Player) FirstCall() uint64 { return p.tr.Passes[0].Calls }

// PassNumber is the number of the pass under way, the recorded one's.
func (p *Player) PassNumber() uint64 { return p.cur.N }

// Clock is the pass's clock (agent.Deps.Clock): its start, its
// observation's end, each answer's and deletion's time.
func (p *Player) Clock() clock.Clock { return p.clk }

// PassClock is what the loop decides with (agent.Deps.PassClock): the
// readings the recorded agent took in the pass.
func (p *Player) PassClock() clock.PassiveClock { return &p.played }

// Acting reports whether the recorded agent acted in the pass under way
// (agent.Deps.Acting).
func (p *Player) Acting() bool { return p.cur.Acting }

// Begin makes pass i of the trace the one under way, and returns it.
func (p *Player) Begin(i int) *trace.Pass {
	p.idx, p.cur = i, &p.tr.Passes[i]
	if p.cur.Pods != nil {
		p.pods = p.cur.Pods
	}
	return p.cur
}

// Deleted sets the clock to a deletion the pass took note of, for the
// loop to be told of it (agent.Loop.PodDeleted).
func (p *Player) Deleted(d trace.Deletion) *v1.Pod {
	p.clk.SetTime(d.At)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: d.UID, Namespace: d.Namespace, Name: d.Name}}
}

// Start sets the clock to the pass's start and hands out its readings; it
// returns the wake-up that started it.
func (p *Player) Start() wakeup.Wakeup {
	p.clk.SetTime(p.cur.At)
	p.played.begin(p.cur, p.tr.Header.Format >= trace.FormatReadings)
	w := p.cur.Wakeup
	return wakeup.Wakeup{Source: wakeup.Source(w.Source), Name: w.Name, At: w.At}
}

// Diverged reports whether the pass just run took other clock readings
// than the recorded one: more, or fewer.
func (p *Player) Diverged() bool { return p.played.diverged() }

// Readings are how many clock readings the recorded agent took in the pass
// just run and how many the replay took; known is false when the trace
// keeps no readings (before format 4).
func (p *Player) Readings() (recorded, taken int, known bool) {
	return len(p.played.readings), p.played.taken, p.played.has
}

// Finish answers the calls still under way at the trace's end, and returns
// every call the replay made, in the order they were answered.
func (p *Player) Finish() []Call {
	for _, seq := range slices.Sorted(maps.Keys(p.queued)) {
		p.run(seq, p.queued[seq])
	}
	return p.made
}

// Observe returns the pass's recorded observation, on its clock.
func (p *Player) Observe(context.Context) (*pressure.Observation, error) {
	if !p.cur.ObservedAt.IsZero() {
		p.clk.SetTime(p.cur.ObservedAt)
	}
	switch {
	case p.cur.ObserveError != "":
		return nil, errors.New(p.cur.ObserveError)
	case p.cur.Observation == nil:
		return nil, fmt.Errorf("pass %d: no observation recorded", p.cur.N)
	}
	return p.cur.Observation, nil
}

// RemeasureEphemeral: the recorded observations already hold what the
// agent walked again.
func (p *Player) RemeasureEphemeral([]string) {}

func (p *Player) Wait(context.Context, time.Duration) (wakeup.Wakeup, error) {
	return wakeup.Wakeup{}, errors.New("replay: the passes are driven, not waited for")
}

func (p *Player) Kick(string) {}

func (p *Player) Pods() []*v1.Pod {
	if p.pods == nil {
		return nil
	}
	return p.pods.Pods
}

func (p *Player) PriorityClasses() map[string]int32 {
	if p.pods == nil {
		return nil
	}
	return p.pods.PriorityClasses
}

func (p *Player) NamespaceLabels() map[string]map[string]string {
	if p.pods == nil {
		return nil
	}
	return p.pods.NamespaceLabels
}

func (p *Player) Node() *v1.Node {
	if p.pods == nil {
		return nil
	}
	return p.pods.Node
}

func (p *Player) Evict(_ context.Context, req evict.Request) (evict.Outcome, error) {
	return p.answer(req, false)
}

func (p *Player) ForceDelete(_ context.Context, req evict.Request) (evict.Outcome, error) {
	return p.answer(req, true)
}

// answer is the recorded answer to the call being run when the recorded
// agent made the same call (the same pod, the same way), else an accepted
// eviction.
func (p *Player) answer(req evict.Request, force bool) (evict.Outcome, error) {
	seq := p.running
	made := Call{Decision: trace.DecisionOf(req, force, p.launchedPass[seq], p.launchedAt[seq])}
	defer func() { p.made = append(p.made, made) }()
	if rec, ok := p.answers[seq]; ok && rec.UID == req.Pod.UID && rec.Force == force {
		made.Result, made.Recorded = rec.Result, true
		out := evict.Outcome{Result: evict.Result(rec.Result), GracePeriodSeconds: rec.GracePeriodSeconds, Accepted: rec.Accepted,
			RetryAfter: rec.RetryAfter, Attempts: rec.Attempts, Cached: rec.Cached}
		switch {
		case rec.ErrorKind == trace.ErrorEpisodeCap:
			return out, fmt.Errorf("%w (recorded: %s)", evict.ErrEpisodeCap, rec.Error)
		case rec.ErrorKind == trace.ErrorCanceled:
			return out, fmt.Errorf("%w (recorded: %s)", context.Canceled, rec.Error)
		case rec.Error != "":
			return out, errors.New(rec.Error)
		}
		return out, nil
	}
	out := evict.Outcome{Result: evict.Evicted, GracePeriodSeconds: p.evict.GracePeriod(req.Pod, req.Hard, req.GraceOverride), Accepted: p.clk.Now()}
	if force {
		out.Result = evict.ForcedDelete
	}
	if p.evict.DryRun {
		out = evict.Outcome{Result: evict.DryRun, GracePeriodSeconds: out.GracePeriodSeconds}
	}
	made.Result = string(out.Result)
	return out, nil
}

func (p *Player) NewBudget() *evict.Budget { return new(evict.Budget) }

func (p *Player) NodeThresholdMet(thresholds.Signal, bool, int64, int64) {}

func (p *Player) PressureEnded(string) {}

func (p *Player) VictimStuck(string, string, types.UID, string) {}
