// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/kubeletcfg"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
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
	// Diverged are the passes whose clock readings the replay did not take
	// as the agent took them (more or fewer: another configuration decided
	// otherwise), or nil. Past the readings recorded, a pass decides on its
	// own clock (pkg/trace/play).
	Diverged []uint64
}

// Replay runs the loop again over tr's passes with o (built from the
// trace's header, or with another --config), on the trace's own clock:
// each pass sees the recorded observation, pod list and wake-up, reads
// the clock times the agent read (pkg/trace/play), and each eviction call
// gets the answer the recorded agent got at the point of the pass it got
// it. A call the recorded agent did not make gets an accepted
// eviction. The node's figures stay those recorded: a pod the replay
// evicts and the recorded agent did not keeps its usage in later passes.
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
	h := tr.Header
	// The header keeps no image collection thresholds: the kubelet's
	// defaults, and the first pass's disk layout.
	start := kubeletplace.ViewOf(h.Capacity, "")
	if ob := tr.Passes[0].Observation; ob != nil {
		start.DiskLayout = ob.Node.DiskLayout
	}
	gc := kubeletcfg.ImageGC{High: kubeletcfg.DefaultImageGCHigh, Low: kubeletcfg.DefaultImageGCLow}
	if err := replayPlace(o, h.KubeletHard, start, gc, log, m); err != nil {
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
	loop, err := NewLoop(lc, Deps{Observer: p, Waker: p, Pods: p, Evictor: p, Metrics: m, Log: log,
		Clock: p.Clock(), PassClock: p.PassClock(), Go: p.Launch, Acting: p.Acting, Replay: p})
	if err != nil {
		return nil, err
	}
	res := &ReplayResult{Left: left, DryRun: o.Evict.DryRun, Passes: len(tr.Passes)}
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
		if pl := pass.Placed; pl != nil {
			// The agent placed its thresholds anew before this pass: this
			// configuration is placed against what the agent placed against,
			// and the loop takes the result at the pass's start, as the
			// agent's did.
			again := base
			again.Config = options.CloneConfig(base.Config)
			gc := kubeletcfg.ImageGC{High: pl.ImageGCHigh, Low: pl.ImageGCLow}
			if err := replayPlace(&again, pl.KubeletHard, kubeletplace.ViewOf(pl.Capacity, fslayout.Layout(pl.DiskLayout)), gc, log, m); err != nil {
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
		if p.Diverged() {
			res.Diverged = append(res.Diverged, pass.N)
		}
	}
	// Calls still under way at the trace's end are reported too.
	res.Calls = p.Finish()
	return res, nil
}

// ReplayPlacement is a set of thresholds a replay switched to, from pass
// Pass on.
type ReplayPlacement struct {
	Pass       uint64   `json:"pass"`
	Thresholds []string `json:"thresholds"`
}

// replayPlace places o's thresholds above the kubelet's hard thresholds
// kubeletHard as a trace keeps them, with view and gc for the mixed units
// and the disk thresholds' bound, as the agent placed its own (placeWith):
// nothing with --kubelet-thresholds=ignore, or when they were not read.
func replayPlace(o *options.Options, kubeletHard map[string]string, view kubeletplace.View, gc kubeletcfg.ImageGC, log *zap.Logger, m *metrics.Metrics) error {
	if kubeletHard == nil || o.KubeletThresholds != options.KubeletPlace {
		return nil
	}
	hard, ignored, err := kubeletcfg.ParseHard(kubeletHard)
	if err != nil {
		return err
	}
	kubeletplace.PlaceWith(o, kubeletcfg.Result{Hard: hard, Raw: kubeletHard, From: "the trace", Ignored: ignored, ImageGC: gc}, view, log, m)
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
