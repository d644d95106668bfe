// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/kubeletcfg"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/pkg/trace/play"
)

// ReplayResult is what a replay decided.
type ReplayResult struct {
	// Thresholds are those the replay ran with.
	Thresholds []string
	// Left are the configured thresholds the replay cannot run, each with
	// why.
	Left   []string
	DryRun bool
	Passes int
	Calls  []play.Call
	// Placed are the thresholds the replay switched to where the agent
	// placed its own anew above the kubelet's (it restarted with others):
	// this configuration placed against the same kubelet thresholds.
	Placed []ReplayPlacement
	// Unknown lists what the agent read that the trace does not keep (an
	// older format), each with what the replay did without it.
	Unknown []string
	// Guessed: an input of the replay's decisions is among Unknown, so a
	// pass it did otherwise than the agent may owe that to the guess.
	Guessed bool
	// Differ are the passes the replay did otherwise than the recorded
	// agent: it decided with other thresholds, made other calls, or read
	// the clock more or fewer times (another configuration decided
	// otherwise; past the readings recorded, a pass decides on its own
	// clock: pkg/trace/play). Judge says what they mean.
	Differ []PassDiff
}

// PassDiff is a pass a replay did otherwise than the recorded agent: which
// parts differed, and what each did.
type PassDiff struct {
	Pass       uint64  `json:"pass"`
	Thresholds bool    `json:"thresholdsDiffer,omitempty"`
	Calls      bool    `json:"callsDiffer,omitempty"`
	Readings   bool    `json:"readingsDiffer,omitempty"`
	Agent      PassDid `json:"agent"`
	Replay     PassDid `json:"replay"`
}

// PassDid is what the agent, or a replay, did in a pass.
type PassDid struct {
	// Thresholds are those the pass decided with, where the agent's are
	// known to compare: at the trace's first pass and where the agent placed
	// anew.
	Thresholds []string `json:"thresholds,omitempty"`
	// Calls are the eviction calls the pass made.
	Calls []trace.Decision `json:"calls"`
	// Readings is how many times the pass read the clock; -1 when the trace
	// keeps no readings.
	Readings int `json:"readings"`
}

// Judge sorts the passes a replay did otherwise than the agent: with the
// recorded configuration (recorded) and nothing guessed, each is a
// divergence, the replay failing to decide as the agent did with what the
// agent had; with a guessed input, none can be called one, and each is not
// comparable. With another configuration a difference in thresholds or
// calls is what the configuration changes, and a pass is not comparable
// only where it read the clock past (or short of) the agent's readings:
// there it decided with times the agent never read.
func (r *ReplayResult) Judge(recorded bool) (diverged, notComparable []PassDiff) {
	for _, d := range r.Differ {
		switch {
		case recorded && !r.Guessed:
			diverged = append(diverged, d)
		case recorded || d.Readings:
			notComparable = append(notComparable, d)
		}
	}
	return diverged, notComparable
}

// Replay runs the loop again over tr's passes with o (built from the
// trace's header, or with another --config), on the trace's own clock:
// each pass sees the recorded observation, pod list and wake-up, reads
// the clock times the agent read (pkg/trace/play), and each eviction call
// gets the answer the recorded agent got at the point of the pass it got
// it. A call the recorded agent did not make gets an accepted
// eviction. The node's figures stay those recorded: a pod the replay
// evicts and the recorded agent did not keeps its usage in later passes.
// Each pass's thresholds (where the agent's are known), calls and clock
// readings are compared with the agent's (ReplayResult.Differ).
func Replay(ctx context.Context, o *options.Options, tr *trace.Trace, log *zap.Logger) (*ReplayResult, error) {
	if len(tr.Passes) == 0 {
		return nil, errors.New("replay: the trace holds no pass")
	}
	if log == nil {
		log = zap.NewNop()
	}
	m, err := metrics.New(buildinfo.Info{})
	if err != nil {
		return nil, err
	}
	// The configuration before placement, which each placement the trace
	// recorded while the agent ran places anew.
	base := *o
	base.Config = options.CloneConfig(o.Config)
	start, agentStart, unknown, guessed := startOf(tr, o.KubeletThresholds == options.KubeletPlace)
	if err := replayPlace(o, start, log, m); err != nil {
		return nil, fmt.Errorf("replay: the trace's kubelet thresholds: %w", err)
	}
	ths := o.Thresholds()
	rankOpts, err := o.Config.RankOptions()
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	lc := ConfigFor(o, ths, rankOpts)
	var left []string
	// The trace holds no container's memory.events: the family would read
	// today's counters off this host against the trace's clock.
	memHigh := lc.MemoryHigh.Enabled()
	replayable := func(ths []thresholds.Threshold) []thresholds.Threshold {
		if !memHigh {
			return ths
		}
		return slices.DeleteFunc(slices.Clone(ths), func(th thresholds.Threshold) bool { return th.Signal == thresholds.MemoryHighStuck })
	}
	if memHigh {
		lc.MemoryHigh = memhigh.Thresholds{}
		ths = replayable(ths)
		lc.Thresholds = ths
		left = append(left, string(thresholds.MemoryHighStuck)+": the trace holds no container's memory.events")
	}
	p := play.New(tr, o.Evict)
	calls := &passCalls{}
	loop, err := NewLoop(lc, Deps{Observer: p, Waker: p, Pods: p, Evictor: p, Metrics: m, Log: log,
		Clock: p.Clock(), PassClock: p.PassClock(), Go: p.Launch, Acting: p.Acting, Replay: p, Trace: calls})
	if err != nil {
		return nil, err
	}
	res := &ReplayResult{Left: left, DryRun: o.Evict.DryRun, Passes: len(tr.Passes), Unknown: unknown, Guessed: guessed}
	res.Thresholds = thresholdStrings(ths)
	// current is what the loop decides with.
	current := res.Thresholds
	for i := range tr.Passes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pass := p.Begin(i)
		for _, d := range pass.Deleted {
			loop.PodDeleted(p.Deleted(d))
		}
		// agent is the thresholds the agent decided the pass with, where
		// the trace says: at its first pass and where it placed anew.
		var agent []string
		if i == 0 {
			agent = agentStart
		}
		if pl := pass.Placed; pl != nil {
			agent = pl.Thresholds
			// The agent placed its thresholds anew before this pass: this
			// configuration is placed against what the agent placed against,
			// and the loop takes the result at the pass's start, as the
			// agent's did.
			again := base
			again.Config = options.CloneConfig(base.Config)
			if err := replayPlace(&again, placedOf(tr.Header.Format, pl), log, m); err != nil {
				return nil, fmt.Errorf("replay: pass %d's kubelet thresholds: %w", pass.N, err)
			}
			// A placement carried to a part of the trace (or one that moves
			// none of this configuration's thresholds) changes nothing.
			placed := replayable(again.Thresholds())
			if s := thresholdStrings(placed); !slices.Equal(s, current) {
				loop.SetThresholds(placed)
				res.Placed = append(res.Placed, ReplayPlacement{Pass: pass.N, Thresholds: s})
				current = s
			}
		}
		loop.Step(ctx, p.Start())
		if d, differ := passDiff(pass, agent, current, calls.launched, p, memHigh); differ {
			res.Differ = append(res.Differ, d)
		}
	}
	// Calls still under way at the trace's end are reported too.
	res.Calls = p.Finish()
	return res, nil
}

// startOf is what the agent's start placed against (what placement reads
// of it), the thresholds the agent started with (nil when the trace does
// not say), and what the trace does not keep of it: a header before format
// 5 keeps the kubelet's hard thresholds and the capacities only. The disk
// layout is then the first pass's, and the image collection's thresholds
// the kubelet's defaults: guessed when placement read the kubelet's
// (place), since they bound the disk thresholds placed.
func startOf(tr *trace.Trace, place bool) (start trace.Placement, agent []string, unknown []string, guessed bool) {
	h := tr.Header
	if h.Start != nil {
		return *h.Start, nonNil(h.Start.Thresholds), nil, false
	}
	start = trace.Placement{KubeletRead: h.KubeletHard != nil, KubeletHard: h.KubeletHard, Capacity: h.Capacity,
		ImageGCHigh: kubeletcfg.DefaultImageGCHigh, ImageGCLow: kubeletcfg.DefaultImageGCLow}
	if ob := tr.Passes[0].Observation; ob != nil {
		start.DiskLayout = string(ob.Node.DiskLayout)
	}
	why := fmt.Sprintf("(trace format %d keeps none)", h.Format)
	unknown = append(unknown, "the thresholds the agent started with "+why+": the replay's are not checked against them")
	if place && start.KubeletRead {
		guessed = true
		unknown = append(unknown,
			fmt.Sprintf("the kubelet's image collection thresholds at start %s: the replay bounds the disk thresholds with the kubelet's defaults, %d%% and %d%%",
				why, kubeletcfg.DefaultImageGCHigh, kubeletcfg.DefaultImageGCLow),
			"the node's disk layout at start "+why+": the replay places with the first pass's")
	}
	if place && h.Format < trace.FormatStart {
		unknown = append(unknown, fmt.Sprintf("placements while the agent ran that moved none of its thresholds (trace format %d keeps only those that did): another configuration keeps its thresholds there", h.Format))
	}
	if h.Format < trace.FormatReadings {
		guessed = true
		unknown = append(unknown, fmt.Sprintf("the clock readings the agent decided with (trace format %d keeps none): each pass decides on the clock of its start and its observation", h.Format))
	}
	return start, nil, unknown, guessed
}

// nonNil is s, empty rather than nil: thresholds known to be none.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// placedOf is a placement as the format it is in says: before format 5 a
// placement kept no KubeletRead, and its kubelet thresholds being there
// said so.
func placedOf(format int, pl *trace.Placement) trace.Placement {
	out := *pl
	if format < trace.FormatStart {
		out.KubeletRead = pl.KubeletHard != nil
	}
	return out
}

// passDiff compares what the replay did in the pass just run with what the
// agent did: the thresholds (agent nil: not known for the pass), the calls
// launched, and the clock readings.
func passDiff(pass *trace.Pass, agent, replay []string, launched []trace.Decision, p *play.Player, memHigh bool) (PassDiff, bool) {
	d := PassDiff{Pass: pass.N, Agent: PassDid{Calls: []trace.Decision{}}, Replay: PassDid{Calls: slices.Clone(launched)}}
	if d.Replay.Calls == nil {
		d.Replay.Calls = []trace.Decision{}
	}
	for _, c := range pass.Launched {
		d.Agent.Calls = append(d.Agent.Calls, c.Decision)
	}
	if agent != nil {
		if memHigh {
			// The replay runs no memory.high family (ReplayResult.Left).
			prefix := string(thresholds.MemoryHighStuck) + thresholds.MemoryHighStuck.Operator()
			agent = slices.DeleteFunc(slices.Clone(agent), func(s string) bool { return strings.HasPrefix(s, prefix) })
		}
		d.Thresholds = !slices.Equal(agent, nonNil(replay))
		d.Agent.Thresholds, d.Replay.Thresholds = agent, nonNil(replay)
	}
	d.Calls = !slices.EqualFunc(d.Agent.Calls, d.Replay.Calls, func(a, b trace.Decision) bool {
		return play.Call{Decision: a}.Same(play.Call{Decision: b})
	})
	recorded, taken, known := p.Readings()
	d.Agent.Readings, d.Replay.Readings = -1, taken
	if known {
		d.Agent.Readings = recorded
		d.Readings = recorded != taken
	}
	return d, d.Thresholds || d.Calls || d.Readings
}

// passCalls is a replay's Tracer: the calls the pass under way launched,
// for passDiff.
type passCalls struct {
	launched []trace.Decision
}

func (c *passCalls) Begin(uint64, uint64, time.Time, trace.Wakeup)                                { c.launched = nil }
func (c *passCalls) Deleted(trace.Deletion)                                                       {}
func (c *passCalls) Drained(int, []trace.Call)                                                    {}
func (c *passCalls) Placed(trace.Placement)                                                       {}
func (c *passCalls) Launched(call trace.Call)                                                     { c.launched = append(c.launched, call.Decision) }
func (c *passCalls) Observed(*pressure.Observation, error, time.Time, bool)                       {}
func (c *passCalls) PodState([]*v1.Pod, map[string]int32, map[string]map[string]string, *v1.Node) {}
func (c *passCalls) Reading(time.Time)                                                            {}
func (c *passCalls) End()                                                                         {}

// ReplayPlacement is a set of thresholds a replay switched to, from pass
// Pass on.
type ReplayPlacement struct {
	Pass       uint64   `json:"pass"`
	Thresholds []string `json:"thresholds"`
}

// replayPlace places o's thresholds above the kubelet's as a trace keeps
// what a placement read (pl: the kubelet's hard thresholds, the
// capacities and disk layout for the mixed units and the disk thresholds'
// bound, the image collection's thresholds), as the agent placed its own
// (PlaceWith): nothing with --kubelet-thresholds=ignore, or when the
// kubelet's were not read.
func replayPlace(o *options.Options, pl trace.Placement, log *zap.Logger, m *metrics.Metrics) error {
	if !pl.KubeletRead || o.KubeletThresholds != options.KubeletPlace {
		return nil
	}
	hard, ignored, err := kubeletcfg.ParseHard(pl.KubeletHard)
	if err != nil {
		return err
	}
	gc := kubeletcfg.ImageGC{High: pl.ImageGCHigh, Low: pl.ImageGCLow}
	view := kubeletplace.ViewOf(pl.Capacity, fslayout.Layout(pl.DiskLayout))
	kubeletplace.PlaceWith(o, kubeletcfg.Result{Hard: hard, Raw: pl.KubeletHard, From: "the trace", Ignored: ignored, ImageGC: gc}, view, log, m)
	return nil
}

// thresholdStrings are ths as they print.
func thresholdStrings(ths []thresholds.Threshold) []string {
	var out []string
	for _, th := range ths {
		out = append(out, th.String())
	}
	return out
}
