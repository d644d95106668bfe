// SPDX-License-Identifier: Apache-2.0

// Package kubeletplace keeps evictd's hard thresholds above the node's
// kubelet's (--kubelet-thresholds=place): at start, and again whenever the
// kubelet process changes, since the kubelet reads its configuration only
// when it starts. evictd evicting first, with PodDisruptionBudgets, is the
// point; a threshold the operator set at or below the kubelet's is warned
// about, never moved.
package kubeletplace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/backoff"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/kubeletcfg"
	"github.com/evictd/evictd/pkg/kubeletwatch"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// Check names the /readyz warning of the placement (Placer.Detail). It
// warns, and never fails: evictd protects the node at its own thresholds
// whatever the kubelet's are; what the warning tells is that the kubelet
// may evict first, without PodDisruptionBudgets.
const Check = "kubelet-thresholds"

// A failed read of the kubelet's thresholds is tried again after about
// RetryInitial, the wait doubling to RetryMax (each spread by jitter, pkg/backoff),
// until one succeeds or the kubelet restarts (read at once, the wait from
// RetryInitial again). A config file being rewritten, or fixed, is read
// without waiting for the kubelet's next restart; a failure that lasts
// costs one read every few minutes.
const (
	RetryInitial = 30 * time.Second
	RetryMax     = 5 * time.Minute
)

// ReasonIgnored is the reason the metric gives with
// --kubelet-thresholds=ignore (kubeletcfg.ReasonOf gives the others).
const ReasonIgnored = "ignored"

// ReasonThresholdBelowKubelet is the Event reason on the Node when a hard
// threshold the operator set sits at or below the kubelet's.
const ReasonThresholdBelowKubelet = "EvictdThresholdBelowKubelet"

// Placement is what evictd made of the kubelet's thresholds at
// start; its Detail is the readiness check's warning.
type Placement struct {
	// Known: the kubelet's thresholds were read.
	Known bool
	// Err says why they were not (nil when ignored on purpose); Reason
	// says it in a word (kubeletcfg.ReasonOf), Fix what to do about it.
	Err    error
	Reason kubeletcfg.Reason
	Fix    string
	// Below lists the operator's thresholds at or below the kubelet's, as
	// "memory.available<500Mi (kubelet 750Mi)".
	Below []string
	// KubeletHard is the kubelet's thresholds as its map spells them (a
	// trace's header keeps them for a replay's placement).
	KubeletHard map[string]string
	// Uncompared lists the signals whose threshold could not be compared
	// with the kubelet's, a percentage against a quantity with the
	// capacity not observed: evictd's stays where it was.
	Uncompared []string
	// Kept says, after a kubelet restart whose read failed, that evictd
	// keeps the thresholds it placed above the kubelet's last reading.
	Kept bool
	// ImageGC is the kubelet's image collection thresholds read with
	// KubeletHard, which bound the disk thresholds placed (a trace keeps
	// them with a placement while the agent runs).
	ImageGC kubeletcfg.ImageGC
}

// Detail is the /readyz warning: empty when there is nothing to say.
// Readiness stays OK either way: evictd still protects the node, only later
// than the kubelet for these signals.
func (k *Placement) Detail() string {
	if k == nil {
		return ""
	}
	var parts []string
	if len(k.Below) > 0 {
		parts = append(parts, "at or below the kubelet's, so the kubelet evicts first: "+strings.Join(k.Below, ", "))
	}
	if len(k.Uncompared) > 0 {
		parts = append(parts, "not compared with the kubelet's, the capacity unknown (evictd places again once a pass has observed it): "+strings.Join(k.Uncompared, ", "))
	}
	switch {
	case k.Err != nil && k.Kept:
		parts = append(parts, "the kubelet's thresholds are unknown since its restart, evictd keeps those placed above its last reading ("+string(k.Reason)+"): "+k.Err.Error()+"; "+k.Fix)
	case k.Err != nil:
		parts = append(parts, "the kubelet's thresholds are unknown, evictd keeps its defaults ("+string(k.Reason)+"): "+k.Err.Error()+"; "+k.Fix)
	}
	return strings.Join(parts, "; ")
}

// PlaceAbove reads the node's kubelet thresholds and, with
// --kubelet-thresholds=place, moves evictd's default hard thresholds a margin
// above them (kubeletcfg.Place), before the thresholds are handed to the
// loop. It never fails the start: without the kubelet's thresholds evictd
// keeps its defaults and says so. start is one observation's signals, for
// the mixed units, and disk layout, for the image collection's bound; empty
// when none could be made.
func PlaceAbove(o *options.Options, start View, log *zap.Logger, m *metrics.Metrics) *Placement {
	return placeAbove(o, start, log, m, NewImpostorLog(log), "")
}

// placeAbove is PlaceAbove; a failure whose error reads as before, the
// last try's, is logged at info: it was warned of.
func placeAbove(o *options.Options, start View, log *zap.Logger, m *metrics.Metrics, imp *ImpostorLog, before string) *Placement {
	st := &Placement{}
	if o.KubeletThresholds == options.KubeletIgnore {
		m.SetKubeletThresholdsUnknown(ReasonIgnored)
		log.Info("the kubelet's thresholds are not read (--kubelet-thresholds=ignore): evictd's own as configured")
		return st
	}
	res, err := kubeletcfg.Read(kubeletcfg.Options{HostRoot: o.HostRoot, ConfigPath: o.KubeletConfig, Refused: imp.Refused})
	if err != nil {
		st.Err, st.Reason, st.Fix = err, kubeletcfg.ReasonOf(err), Fix(err)
		m.SetKubeletThresholdsUnknown(string(st.Reason))
		fields := []zap.Field{logging.Err(err), zap.String("reason", string(st.Reason)), zap.String("fix", st.Fix)}
		if err.Error() == before {
			log.Info("the kubelet's eviction thresholds are still unknown", fields...)
		} else {
			log.Warn("the kubelet's eviction thresholds are unknown: evictd keeps its own defaults, which may sit below the kubelet's", fields...)
		}
		return st
	}
	return PlaceWith(o, *res, start, log, m)
}

// Fix says what to do about err, a failed kubeletcfg.Read, by its reason
// (docs/run.md, "When it cannot read them"). It names the real cause: a
// mount only when a directory is not visible.
func Fix(err error) string {
	give := "give --" + options.FlagKubeletConfig + "=PATH (the kubelet's config file, an absolute host path)"
	var (
		nv  *kubeletcfg.NotVisibleError
		rel *kubeletcfg.RelativePathError
	)
	switch kubeletcfg.ReasonOf(err) {
	case kubeletcfg.ReasonNotMounted:
		errors.As(err, &nv)
		return "mount " + nv.Dir + " read-only under --" + options.FlagHostRoot + " (chart: the platform's preset, docs/install.md section 3, or kubeletConfig.hostPath; kubeletConfig.hostFiles mounts a file alone, where its directory holds credentials), or " + give
	case kubeletcfg.ReasonMissing:
		return "nothing to mount: the file is not on the host (a config being rewritten, or one the kubelet cannot start with); evictd reads it again with back-off"
	case kubeletcfg.ReasonRelativePath:
		errors.As(err, &rel)
		if rel.Flag == "--config" {
			return give + ", or start the kubelet with an absolute --config; evictd reads the kubelet's working directory only with ptrace access to it (CAP_SYS_PTRACE), which it is not granted"
		}
		return "start the kubelet with an absolute " + rel.Flag + " (--" + options.FlagKubeletConfig + " replaces only --config); evictd reads the kubelet's working directory only with ptrace access to it (CAP_SYS_PTRACE), which it is not granted"
	case kubeletcfg.ReasonProcHidden:
		return "let evictd see the host's processes: add the group of the host /proc's gid= option to the pod's supplementalGroups, or mount /proc without hidepid; or " + give + " (the kubelet's flags and restarts then stay unseen)"
	case kubeletcfg.ReasonInvalid:
		return "the kubelet refuses this configuration too: correct the file or flag named; evictd reads it again with back-off, and when the kubelet restarts"
	case kubeletcfg.ReasonUnreadable:
		return "the file named must be a regular file of at most 1 MiB that evictd can read; or " + give
	}
	return give + ", or --" + options.FlagKubeletThresholds + "=ignore to stop looking"
}

// PlaceWith moves evictd's defaults above the kubelet's thresholds res,
// read at start or, in a replay, from the trace, within its image
// collection's bound. A kubelet threshold beyond kubeletcfg.MaxKubeletShare
// of its capacity is not adopted: the kubelet's default for that signal is
// placed against instead, with a warning.
func PlaceWith(o *options.Options, res kubeletcfg.Result, start View, log *zap.Logger, m *metrics.Metrics) *Placement {
	capacity := start.Signals
	st := &Placement{Known: true, KubeletHard: res.Raw, ImageGC: res.ImageGC}
	m.SetKubeletThresholdsKnown(true)
	capOf := func(s thresholds.Signal) (int64, bool) {
		ob, ok := capacity[s]
		return ob.Capacity, ok && ob.Capacity > 0
	}
	bounded, refused := kubeletcfg.BoundKubelet(res.Hard, capOf)
	for _, r := range refused {
		log.Warn("a kubelet hard threshold beyond the share of capacity evictd adopts is refused: placement takes the kubelet's default for the signal instead",
			zap.String("signal", string(r.Signal)), zap.String("kubelet", r.Value), zap.String("bound", r.Bound),
			zap.String("kept", r.Kept), zap.String("kubeletFrom", res.From))
	}
	res.Hard = bounded
	imagesOn := func(s thresholds.Signal) bool { return fslayout.ImagesOn(start.DiskLayout, s.Filesystem()) }
	ps, placed := kubeletcfg.Place(maps.Clone(o.Config.EvictionHard), o.Config.OperatorHard(), res.Hard, capOf, res.ImageGC, imagesOn)
	if len(placed) > 0 {
		if err := o.Config.PlaceHard(placed); err != nil {
			log.Error("placing evictd's thresholds above the kubelet's failed: evictd keeps its defaults", logging.Err(err))
			placed = nil
		}
	}
	below := map[thresholds.Signal]bool{}
	m.ResetKubeletThresholds()
	for _, p := range ps {
		if p.KubeletFirst {
			below[p.Signal] = true
		}
		if p.Kubelet != "" {
			m.SetKubeletThresholdCompared(p.Signal, p.Note == "")
		}
		if p.Note != "" {
			st.Uncompared = append(st.Uncompared, fmt.Sprintf("%s<%s (kubelet %s)", p.Signal, p.Evictd, p.Kubelet))
		}
		if p.Operator && p.KubeletFirst {
			st.Below = append(st.Below, fmt.Sprintf("%s<%s (kubelet %s)", p.Signal, p.Evictd, p.Kubelet))
			log.Warn("a hard threshold set for evictd sits at or below the kubelet's: the kubelet evicts first, without PodDisruptionBudgets; raise it or leave it to the default",
				zap.String("signal", string(p.Signal)), zap.String("evictd", p.Evictd), zap.String("kubelet", p.Kubelet))
		}
	}
	if !o.Config.OperatorHard()[string(thresholds.AllocatableMemoryAvailable)] {
		below[thresholds.AllocatableMemoryAvailable] = below[thresholds.MemoryAvailable]
	}
	for s, v := range res.Hard {
		amount := int64(-1)
		if c, ok := capOf(s); ok || v.Quantity != nil {
			amount = v.Amount(c)
		}
		m.SetKubeletThreshold(s, amount, below[s])
	}
	log.Info("evictd's hard thresholds placed above the kubelet's", zap.String("kubeletFrom", res.From),
		zap.String("kubelet", thresholds.JoinStatements(res.Raw)), zap.Strings("placed", kubeletcfg.Summary(ps)),
		zap.Int("moved", len(placed)), zap.Strings("ignoredSignals", sortedCopy(res.Ignored)),
		zap.Int32("imageGCHighThresholdPercent", res.ImageGC.High), zap.Int32("imageGCLowThresholdPercent", res.ImageGC.Low))
	return st
}

// EmitBelow writes one Warning Event on the Node for the thresholds
// at or below the kubelet's.
func (k *Placement) EmitBelow(emit Emitter, node string) {
	if k == nil || len(k.Below) == 0 || emit == nil {
		return
	}
	emit(v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}, v1.EventTypeWarning,
		ReasonThresholdBelowKubelet, "Configure",
		"evictd's hard thresholds "+strings.Join(k.Below, ", ")+" sit at or below the kubelet's: the kubelet evicts first, without PodDisruptionBudgets")
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// View is what placement needs of one observation at start: the
// signals, for the mixed units, and the disk layout, for whether nodefs
// holds the images. Zero when the observation failed: placement then
// leaves the mixed units alone and bounds imagefs only.
type View struct {
	Signals    map[thresholds.Signal]thresholds.Observation
	DiskLayout fslayout.Layout
}

// Observe takes one observation for placement.
func Observe(ctx context.Context, obsv *pressure.Observer, log *zap.Logger) View {
	obs, err := obsv.Observe(ctx)
	if err != nil {
		log.Info("no observation at start for the kubelet's thresholds: a percentage against a quantity is not compared", logging.Err(err))
		return View{}
	}
	return View{Signals: thresholds.Observe(obs.Summary), DiskLayout: obs.Node.DiskLayout}
}

// Placer keeps evictd's hard thresholds placed above the kubelet's
// while the agent runs. The kubelet reads its configuration only when it
// starts, so evictd reads it again when the kubelet process changes
// (package kubeletwatch), and places again from its own configuration as
// it was before any placement, so that a kubelet that lowered its
// thresholds lowers evictd's defaults too. It also places again when the
// last placement could not compare a signal for want of its capacity and a
// pass has observed it since.
type Placer struct {
	// o is the agent's options with Config before placement (never
	// placed: each placement works on a copy).
	o   options.Options
	log *zap.Logger
	m   *metrics.Metrics
	// Impostors logs the processes named kubelet that are passed over,
	// once each, for the reads and the watcher alike.
	Impostors *ImpostorLog
	// View is the last pass's observation's signals and disk layout (the
	// start's until a pass has published one).
	View func() View
	// Retune hands the loop the thresholds placed anew, with what they
	// were placed against (Loop.PlacedAnew): after each placement against
	// a kubelet read, and after one that changed the thresholds.
	Retune func([]thresholds.Threshold, trace.Placement)
	// Emit writes the Node's Warning Event (nil in dry run).
	Emit Emitter

	mu  sync.Mutex
	cur *Placement
	ths []thresholds.Threshold

	// The next try of a failed read (zero: none), and the back-off to it;
	// used on the watch's goroutine only (and at start).
	clock   clock.PassiveClock
	retry   backoff.Backoff
	retryAt time.Time
}

// NewPlacer places at start, as PlaceAbove does on o (which
// it changes: the caller reads the placed thresholds from it), and keeps
// a copy of o's configuration from before, for the next placements.
func NewPlacer(o *options.Options, start View, log *zap.Logger, m *metrics.Metrics) *Placer {
	return NewPlacerLogging(o, start, log, m, NewImpostorLog(log), clock.RealClock{})
}

// NewPlacerLogging is NewPlacer with the impostor log that the start's
// kubeletwatch.Find already told, and the clock that times the tries again
// of a failed read.
func NewPlacerLogging(o *options.Options, start View, log *zap.Logger, m *metrics.Metrics, imp *ImpostorLog, clk clock.PassiveClock) *Placer {
	p := &Placer{o: *o, log: log, m: m, Impostors: imp, clock: clk, retry: backoff.Backoff{Initial: RetryInitial, Max: RetryMax}}
	p.o.Config = options.CloneConfig(o.Config)
	p.cur = placeAbove(o, start, log, m, imp, "")
	p.ths = o.Thresholds()
	if next := p.schedule(p.cur); next > 0 {
		log.Info("evictd reads the kubelet's thresholds again after a back-off", zap.Duration("nextTry", next),
			zap.Duration("maxWait", RetryMax), zap.String("reason", string(p.cur.Reason)))
	}
	return p
}

// schedule sets the next try after the placement st: none after a read
// that succeeded (or was not made), else after the next back-off.
func (p *Placer) schedule(st *Placement) time.Duration {
	if st.Err == nil {
		p.retry.Reset()
		p.retryAt = time.Time{}
		return 0
	}
	wait := p.retry.Next()
	p.retryAt = p.clock.Now().Add(wait)
	return wait
}

// retryDue: a failed read waits for its next try, and its time has come.
func (p *Placer) retryDue() bool {
	return !p.retryAt.IsZero() && !p.clock.Now().Before(p.retryAt)
}

// failedCheck is kubeletwatch's report of a check that could not look for
// the kubelet: a failed read is still tried again when due.
func (p *Placer) failedCheck() {
	if p.retryDue() {
		p.Place(p.retryWhy())
	}
}

func (p *Placer) retryWhy() string {
	return fmt.Sprintf("try %d after a failed read (%s)", p.retry.Failures()+1, p.Current().Reason)
}

// Current is the last placement.
func (p *Placer) Current() *Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Detail is the last placement's /readyz warning.
func (p *Placer) Detail() string { return p.Current().Detail() }

// checked is kubeletwatch's report after each check: a new kubelet is read
// and placed against; a kubelet gone changes nothing (the next one will
// be read); a failed read is tried again when its back-off is over; a
// placement that wanted a capacity is tried again once the last pass
// observed it.
func (p *Placer) checked(prev, now kubeletwatch.Process, changed bool) {
	switch {
	case changed && now.IsZero():
		p.log.Info("the kubelet process is gone: evictd keeps its thresholds until a kubelet starts again, and then reads that one's",
			zap.Stringer("was", prev))
	case changed:
		p.m.KubeletRestarted()
		// A new kubelet, read at once: the back-off starts over.
		p.retry.Reset()
		p.Place(fmt.Sprintf("the kubelet restarted (%s, was %s)", now, prev))
	case p.retryDue():
		p.Place(p.retryWhy())
	case p.wantsCapacity():
		p.Place("the capacity is known now")
	}
}

// wantsCapacity: the last placement left signals uncompared for want of
// their capacity, and the last pass observed every one of them.
func (p *Placer) wantsCapacity() bool {
	cur := p.Current()
	if len(cur.Uncompared) == 0 || p.View == nil {
		return false
	}
	sig := p.View().Signals
	for _, u := range cur.Uncompared {
		name, _, _ := strings.Cut(u, "<")
		if ob, ok := sig[thresholds.Signal(name)]; !ok || ob.Capacity <= 0 {
			return false
		}
	}
	return true
}

// Place reads the kubelet's thresholds again and places evictd's above
// them, from the configuration before placement; the loop gets the new
// thresholds when they differ. A failed read keeps the thresholds in
// force, placed above the kubelet's last reading, says so, and is tried
// again after a back-off. Place is called on one goroutine at a time (the
// watch's).
func (p *Placer) Place(why string) {
	o := p.o
	o.Config = options.CloneConfig(p.o.Config)
	view := View{}
	if p.View != nil {
		view = p.View()
	}
	before := ""
	if err := p.Current().Err; err != nil {
		before = err.Error()
	}
	st := placeAbove(&o, view, p.log, p.m, p.Impostors, before)
	ths := o.Thresholds()
	p.mu.Lock()
	prev, prevThs := p.cur, p.ths
	if st.Err != nil && (prev.Known || prev.Kept) {
		// The thresholds placed before stay; so does what they were placed
		// against, for the next trace and the events.
		st.Kept, st.KubeletHard, st.ImageGC = true, prev.KubeletHard, prev.ImageGC
		ths = prevThs
	}
	p.cur, p.ths = st, ths
	p.mu.Unlock()

	changed := thresholdChanges(prevThs, ths)
	fields := []zap.Field{zap.String("why", why), zap.Bool("known", st.Known), zap.Strings("changed", changed), zap.Stringers("thresholds", ths)}
	if next := p.schedule(st); next > 0 {
		fields = append(fields, zap.String("reason", string(st.Reason)), zap.Duration("nextTry", next))
	}
	p.log.Info("evictd read the kubelet's thresholds again", fields...)
	// Every placement against a kubelet read goes to the loop, also one that
	// moved none of evictd's thresholds: the pass that takes it keeps what
	// it was placed against in the trace, where a replay with another
	// configuration, which that kubelet may move, places too.
	if (len(changed) > 0 || st.Known) && p.Retune != nil {
		p.Retune(ths, trace.Placement{KubeletRead: st.Known, KubeletHard: st.KubeletHard, Capacity: TraceCapacity(view.Signals),
			DiskLayout: string(view.DiskLayout), ImageGCHigh: st.ImageGC.High, ImageGCLow: st.ImageGC.Low})
	}
	if !slices.Equal(prev.Below, st.Below) {
		st.EmitBelow(p.Emit, p.o.NodeName)
	}
}

// thresholdChanges lists what moved from before to after, as
// "memory.available<600Mi -> memory.available<800Mi" (a threshold with no
// counterpart of its signal and kind on one side shows "none" there).
func thresholdChanges(before, after []thresholds.Threshold) []string {
	type key struct {
		s    thresholds.Signal
		hard bool
	}
	was := map[key]string{}
	for _, th := range before {
		was[key{th.Signal, th.Hard()}] = th.String()
	}
	var out []string
	for _, th := range after {
		k := key{th.Signal, th.Hard()}
		old, ok := was[k]
		delete(was, k)
		switch {
		case !ok:
			out = append(out, "none -> "+th.String())
		case old != th.String():
			out = append(out, old+" -> "+th.String())
		}
	}
	for _, old := range was {
		out = append(out, old+" -> none")
	}
	sort.Strings(out)
	return out
}

// Watch reads the kubelet's thresholds again whenever its process
// changes, and after a back-off when a read failed, checking on the
// housekeeping cadence (one stat file a check while the kubelet lives),
// until ctx ends. first is the kubelet found
// before the start's read (findErr why none could be looked for).
func Watch(ctx context.Context, first kubeletwatch.Process, findErr error, o *options.Options, p *Placer, clk clock.WithTicker, log *zap.Logger) {
	if findErr != nil {
		log.Info("the kubelet process could not be looked for at start: evictd reads the kubelet's thresholds again when one is found", logging.Err(findErr))
	}
	failing := false
	w := kubeletwatch.New(filepath.Join(o.HostRoot, "proc"), first)
	w.Refused = p.Impostors.Refused
	w.Run(ctx, clk, o.Housekeeping, func(prev, now kubeletwatch.Process, changed bool) {
		failing = false
		p.checked(prev, now, changed)
	}, func(err error) {
		// Once, until a check succeeds again: /proc does not come and go.
		if !failing {
			log.Warn("looking for the kubelet process failed: a kubelet restart is not seen until it works again", logging.Err(err))
		}
		failing = true
		p.failedCheck()
	})
}

// ImpostorLog warns of each process named kubelet that is not taken for
// the kubelet (kubeletcfg.Refused), once: the reads at start and at each
// kubelet restart, and the watcher's scans, see the same processes again.
type ImpostorLog struct {
	log  *zap.Logger
	mu   sync.Mutex
	seen map[kubeletcfg.Refused]bool
}

// NewImpostorLog returns an ImpostorLog writing to log.
func NewImpostorLog(log *zap.Logger) *ImpostorLog {
	return &ImpostorLog{log: log, seen: map[kubeletcfg.Refused]bool{}}
}

// Refused warns of r unless it was told already.
func (l *ImpostorLog) Refused(r kubeletcfg.Refused) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[r] {
		return
	}
	l.seen[r] = true
	l.log.Warn("a process named kubelet is not taken for the kubelet: its thresholds are not read",
		zap.Int("pid", r.PID), zap.String("name", r.Name), zap.String("cgroup", r.Cgroup), zap.String("why", r.Why))
}

// Emitter writes an Event (evict.EventWriter's Emit).
type Emitter func(ref v1.ObjectReference, eventType, reason, action, note string)

// TraceCapacity is each signal's capacity as a trace keeps it (nil for
// none); ViewOf the other way: what placement resolves mixed units with.
func TraceCapacity(signals map[thresholds.Signal]thresholds.Observation) map[string]int64 {
	if len(signals) == 0 {
		return nil
	}
	out := make(map[string]int64, len(signals))
	for s, ob := range signals {
		out[string(s)] = ob.Capacity
	}
	return out
}

// ViewOf is the view a trace's capacities and disk layout give placement.
func ViewOf(capacity map[string]int64, layout fslayout.Layout) View {
	signals := make(map[thresholds.Signal]thresholds.Observation, len(capacity))
	for s, c := range capacity {
		signals[thresholds.Signal(s)] = thresholds.Observation{Capacity: c}
	}
	return View{Signals: signals, DiskLayout: layout}
}
