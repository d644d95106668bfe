// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/kubeletcfg"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// ReplayCall is an eviction call a replay made (or the recorded agent):
// when, of which pod, why, and the answer.
type ReplayCall struct {
	trace.Decision
	// Result is the answer the loop got: the recorded one when the
	// recorded agent made the same call (Recorded), else an accepted
	// eviction (a dry run's verdict in dry run).
	Result   string `json:"result"`
	Recorded bool   `json:"recorded"`
}

// Same reports whether c and r are the same decision: the same pass, pod,
// signal, kind, rank and reasons.
func (c ReplayCall) Same(r ReplayCall) bool {
	return c.Pass == r.Pass && c.Pod == r.Pod && c.Signal == r.Signal && c.Hard == r.Hard && c.Force == r.Force &&
		c.Rank == r.Rank && c.Reason == r.Reason && c.RunnerUp == r.RunnerUp
}

// RecordedCalls are the calls the trace's agent made, in the order it
// made them, with their answers (Result "" for a call still under way at
// the trace's end).
func RecordedCalls(tr *trace.Trace) []ReplayCall {
	bySeq := map[uint64]ReplayCall{}
	for _, p := range tr.Passes {
		for _, c := range p.Launched {
			bySeq[c.Seq] = ReplayCall{Decision: c.Decision, Recorded: true}
		}
		// A call made before the trace began is known by its answer.
		for _, d := range p.Drains {
			for _, c := range d.Calls {
				bySeq[c.Seq] = ReplayCall{Decision: c.Decision, Result: c.Result, Recorded: true}
			}
		}
	}
	out := make([]ReplayCall, 0, len(bySeq))
	for _, seq := range slices.Sorted(maps.Keys(bySeq)) {
		out = append(out, bySeq[seq])
	}
	return out
}

// ReplayResult is what a replay decided.
type ReplayResult struct {
	// Thresholds are those the replay ran with.
	Thresholds []string
	// Left are the configured thresholds the replay cannot run, each with
	// why.
	Left   []string
	DryRun bool
	Passes int
	Calls  []ReplayCall
	// Placed are the thresholds the replay switched to where the agent
	// placed its own anew above the kubelet's (it restarted with others):
	// this configuration placed against the same kubelet thresholds.
	Placed []ReplayPlacement
	// Diverged are the passes whose clock readings the replay did not take
	// as the agent took them (more or fewer: another configuration decided
	// otherwise), or nil. Past the readings recorded, a pass decides on its
	// own clock (playedClock).
	Diverged []uint64
}

// Replay runs the loop again over tr's passes with o (built from the
// trace's header, or with another --config), on the trace's own clock:
// each pass sees the recorded observation, pod list and wake-up, reads
// the clock times the agent read (playedClock), and each eviction call
// gets the answer the recorded agent got at the point of the pass it got
// it. A call the recorded agent did not make gets an accepted
// eviction. The node's figures stay those recorded: a pod the replay
// evicts and the recorded agent did not keeps its usage in later passes.
func Replay(ctx context.Context, o *Options, tr *trace.Trace, log *zap.Logger) (*ReplayResult, error) {
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
	base.Config = cloneConfig(o.Config)
	h := tr.Header
	// The header keeps no image collection thresholds: the kubelet's
	// defaults, and the first pass's disk layout.
	start := placementView(h.Capacity, "")
	if ob := tr.Passes[0].Observation; ob != nil {
		start.diskLayout = ob.Node.DiskLayout
	}
	gc := kubeletcfg.ImageGC{High: kubeletcfg.DefaultImageGCHigh, Low: kubeletcfg.DefaultImageGCLow}
	if err := replayPlace(o, h.KubeletHard, start, gc, log, m); err != nil {
		return nil, fmt.Errorf("replay: the trace's kubelet thresholds: %w", err)
	}
	ths := configThresholds(o)
	rankOpts, err := o.Config.RankOptions()
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	lc := loopConfig(o, ths, rankOpts)
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
	p := newPlayer(tr, o.Evict)
	loop, err := NewLoop(lc, Deps{Observer: p, Waker: p, Pods: p, Evictor: p, Metrics: m, Log: log,
		Clock: p.clk, PassClock: &p.played, Go: p.launch, Acting: func() bool { return p.cur.Acting }})
	if err != nil {
		return nil, err
	}
	loop.tr.beforeDrain = p.deliver
	loop.tr.calls = tr.Passes[0].Calls
	p.seq = tr.Passes[0].Calls
	res := &ReplayResult{Left: left, DryRun: o.Evict.DryRun, Passes: len(tr.Passes)}
	res.Thresholds = thresholdStrings(ths)
	// current is what the loop decides with.
	current := res.Thresholds
	for i := range tr.Passes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.idx, p.cur = i, &tr.Passes[i]
		loop.tr.pass = p.cur.N - 1
		if p.cur.Pods != nil {
			p.pods = p.cur.Pods
		}
		for _, d := range p.cur.Deleted {
			p.clk.SetTime(d.At)
			loop.PodDeleted(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: d.UID, Namespace: d.Namespace, Name: d.Name}})
		}
		if pl := p.cur.Placed; pl != nil {
			// The agent placed its thresholds anew before this pass: this
			// configuration is placed against what the agent placed against,
			// and the loop takes the result at the pass's start, as the
			// agent's did.
			again := base
			again.Config = cloneConfig(base.Config)
			gc := kubeletcfg.ImageGC{High: pl.ImageGCHigh, Low: pl.ImageGCLow}
			if err := replayPlace(&again, pl.KubeletHard, placementView(pl.Capacity, fslayout.Layout(pl.DiskLayout)), gc, log, m); err != nil {
				return nil, fmt.Errorf("replay: pass %d's kubelet thresholds: %w", p.cur.N, err)
			}
			// A placement carried to a part of the trace (or one that moves
			// none of this configuration's thresholds) changes nothing.
			placed := replayable(configThresholds(&again))
			if s := thresholdStrings(placed); !slices.Equal(s, current) {
				loop.SetThresholds(placed)
				res.Placed = append(res.Placed, ReplayPlacement{Pass: p.cur.N, Thresholds: s})
				current = s
			}
		}
		p.clk.SetTime(p.cur.At)
		p.played.begin(p.cur, tr.Header.Format >= trace.FormatReadings)
		w := p.cur.Wakeup
		loop.Step(ctx, wakeup.Wakeup{Source: wakeup.Source(w.Source), Name: w.Name, At: w.At})
		if p.played.diverged() {
			res.Diverged = append(res.Diverged, p.cur.N)
		}
	}
	// Calls still under way at the trace's end are reported too.
	for _, seq := range slices.Sorted(maps.Keys(p.queued)) {
		p.run(seq, p.queued[seq])
	}
	res.Calls = p.made
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
func replayPlace(o *Options, kubeletHard map[string]string, view startView, gc kubeletcfg.ImageGC, log *zap.Logger, m *metrics.Metrics) error {
	if kubeletHard == nil || o.KubeletThresholds != KubeletPlace {
		return nil
	}
	hard, ignored, err := kubeletcfg.ParseHard(kubeletHard)
	if err != nil {
		return err
	}
	placeWith(o, kubeletcfg.Result{Hard: hard, Raw: kubeletHard, From: "the trace", Ignored: ignored, ImageGC: gc}, view, log, m)
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

// player feeds a loop the trace's passes: it is the loop's observer,
// waker, pod source, evictor and call runner in a replay.
type player struct {
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
	made         []ReplayCall
}

func newPlayer(tr *trace.Trace, eo evict.Options) *player {
	p := &player{tr: tr, evict: eo, clk: testclock.NewFakeClock(tr.Passes[0].At), answers: map[uint64]trace.Call{},
		due: map[[2]int][]uint64{}, queued: map[uint64]func(){}, launchedAt: map[uint64]time.Time{},
		launchedPass: map[uint64]uint64{}}
	p.played.pass = p.clk
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

// launch is the loop's call runner: the call waits for its answer's turn.
func (p *player) launch(f func()) {
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
	// more: the pass read the clock past its readings.
	more bool
	last time.Time
}

// begin starts pass p, with its readings when has (the trace's format
// keeps them).
func (c *playedClock) begin(p *trace.Pass, has bool) {
	c.has, c.readings, c.next, c.more, c.last = has, nil, 0, false, time.Time{}
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

// deliver runs, before the loop's drain at point of the current pass, the
// calls whose answers the recorded agent took there, on the clock of each
// answer; at a pass's start, also those it never answered.
func (p *player) deliver(point int) {
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

func (p *player) run(seq uint64, f func()) {
	delete(p.queued, seq)
	p.running = seq
	f()
	p.running = 0
}

// Observe returns the pass's recorded observation, on its clock.
func (p *player) Observe(context.Context) (*pressure.Observation, error) {
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
func (p *player) RemeasureEphemeral([]string) {}

func (p *player) Wait(context.Context, time.Duration) (wakeup.Wakeup, error) {
	return wakeup.Wakeup{}, errors.New("replay: the passes are driven, not waited for")
}

func (p *player) Kick(string) {}

func (p *player) Pods() []*v1.Pod {
	if p.pods == nil {
		return nil
	}
	return p.pods.Pods
}

func (p *player) PriorityClasses() map[string]int32 {
	if p.pods == nil {
		return nil
	}
	return p.pods.PriorityClasses
}

func (p *player) NamespaceLabels() map[string]map[string]string {
	if p.pods == nil {
		return nil
	}
	return p.pods.NamespaceLabels
}

func (p *player) Node() *v1.Node {
	if p.pods == nil {
		return nil
	}
	return p.pods.Node
}

func (p *player) Evict(_ context.Context, req evict.Request) (evict.Outcome, error) {
	return p.answer(req, false)
}

func (p *player) ForceDelete(_ context.Context, req evict.Request) (evict.Outcome, error) {
	return p.answer(req, true)
}

// answer is the recorded answer to the call being run when the recorded
// agent made the same call (the same pod, the same way), else an accepted
// eviction.
func (p *player) answer(req evict.Request, force bool) (evict.Outcome, error) {
	seq := p.running
	made := ReplayCall{Decision: decisionOf(req, force, p.launchedPass[seq], p.launchedAt[seq])}
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

func (p *player) NewBudget() *evict.Budget { return new(evict.Budget) }

func (p *player) NodeThresholdMet(thresholds.Signal, bool, int64, int64) {}

func (p *player) PressureEnded(string) {}

func (p *player) VictimStuck(string, string, types.UID, string) {}

// ReplayOptions are the recorded agent's options, rebuilt from the
// trace's header: its flags, with its config file (kept in the header) or
// configPath in its place. With configPath, the recorded flags that set
// what a config file sets are dropped: the file is the whole
// configuration.
func ReplayOptions(h trace.Header, configPath string) (*Options, error) {
	drop := map[string]bool{"config": true}
	if configPath != "" {
		for _, name := range configFlagNames() {
			drop[name] = true
		}
	}
	args := withoutFlags(h.Args, drop)
	switch {
	case configPath != "":
		args = append(args, "--config="+configPath)
	case h.Config != "":
		dir, err := os.MkdirTemp("", "evictd-replay-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte(h.Config), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--config="+path)
	}
	o, fs := runFlags()
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("the trace's flags %q: %w", strings.Join(h.Args, " "), err)
	}
	if o.NodeName == "" {
		o.NodeName = h.Node
	}
	if err := o.Complete(); err != nil {
		msg := strings.TrimPrefix(err.Error(), ErrUsage.Error()+": ")
		if configPath == "" {
			return nil, fmt.Errorf("the trace's configuration: %s", msg)
		}
		return nil, errors.New(msg)
	}
	return o, nil
}

// runFlags are the flags a running agent was given (`evictd run`'s, but
// for those that print and exit), parsing into new options.
func runFlags() (*Options, *pflag.FlagSet) {
	o := NewOptions()
	s := &cliflag.Sections{}
	o.AddFlags(s)
	var format, level string
	logging.AddFlags(s.Section(SectionLogging), &format, &level)
	return o, s.FlagSet("run")
}

// configFlagNames are the flags of `evictd run` that set what a config
// file sets.
func configFlagNames() []string {
	file, ths, eviction := pflag.NewFlagSet("", pflag.ContinueOnError), pflag.NewFlagSet("", pflag.ContinueOnError), pflag.NewFlagSet("", pflag.ContinueOnError)
	(&config.Config{}).BindFlags(file, ths, eviction)
	var names []string
	for _, fs := range []*pflag.FlagSet{file, ths, eviction} {
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	}
	return names
}

// withoutFlags drops the long flags named in drop from args, in either
// form: --name=value, or --name value (a flag that takes one).
func withoutFlags(args []string, drop map[string]bool) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !drop[name] {
			out = append(out, a)
			continue
		}
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !isBoolFlag(name) {
			i++ // its value
		}
	}
	return out
}

// isBoolFlag: a run flag that takes no separate value.
func isBoolFlag(name string) bool {
	_, fs := runFlags()
	f := fs.Lookup(name)
	return f != nil && f.NoOptDefVal != ""
}
