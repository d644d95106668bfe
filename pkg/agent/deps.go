// SPDX-License-Identifier: Apache-2.0

package agent

// What the loop is built from: its settings, and the collaborators it
// takes through interfaces (the wiring, cmd/evictd/app, gives the real ones;
// tests and the replay their own).

import (
	"context"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/decide"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Observer takes one observation of the node (*pressure.Observer).
type Observer interface {
	Observe(ctx context.Context) (*pressure.Observation, error)
}

// Waker says when to look again (*wakeup.Set).
type Waker interface {
	Wait(ctx context.Context, timeout time.Duration) (wakeup.Wakeup, error)
	Kick(name string)
}

// Evictor evicts pods (*evict.Evictor). Its methods are called from several
// goroutines at once: one per eviction call under way.
type Evictor interface {
	Evict(ctx context.Context, req evict.Request) (evict.Outcome, error)
	ForceDelete(ctx context.Context, req evict.Request) (evict.Outcome, error)
	NewBudget() *evict.Budget
	NodeThresholdMet(s thresholds.Signal, hard bool, threshold, available int64)
	PressureEnded(note string)
	VictimStuck(namespace, name string, uid types.UID, note string)
}

// PodSource is the API server's view of the node (*podwatch.Watcher).
type PodSource interface {
	Pods() []*v1.Pod
	PriorityClasses() map[string]int32
	NamespaceLabels() map[string]map[string]string
	// Node is this node's object (its status.images); nil when unknown.
	Node() *v1.Node
}

// Arming keeps the event-driven wake-up sources armed (*fastpath.Manager).
type Arming interface {
	Sync(obs *pressure.Observation, sig map[thresholds.Signal]thresholds.Observation)
	// EventDriven reports whether an armed event source fires when s
	// crosses its hard threshold.
	EventDriven(s thresholds.Signal) bool
}

// Kicks the loop gets besides the wake-up sources.
const (
	// KickPodGone: a pod in flight was deleted; the reclaim it waited for
	// has landed, so look again at once rather than at the next poll (the
	// kubelet, too, re-checks right after a victim's cleanup).
	KickPodGone = "pod_gone"
	// KickCallDone: an eviction call came back; its answer may let the
	// next candidate go (a PodDisruptionBudget refusal) at once.
	KickCallDone = "call_done"
	// KickDiskFigures: a disk decision was put off until the pods' disk
	// figures are walked again; the next pass walks them, at once.
	KickDiskFigures = "disk_figures"
)

// LoopConfig is the loop's settings, already validated (ConfigFor).
type LoopConfig struct {
	Thresholds []thresholds.Threshold
	// TransitionPeriod is how long a resource's pressure episode lasts after
	// its last threshold cleared (the kubelet's pressure transition period).
	TransitionPeriod time.Duration
	// StallWindow is the window of the stall signals' shares (0:
	// config.DefaultStallWindow), for the stall family.
	StallWindow time.Duration
	// MemoryHigh are the memory.high family's thresholds (off when none;
	// Thresholds then holds their Threshold).
	MemoryHigh memhigh.Thresholds
	// Rank holds the configured part of the ranking options; the loop adds
	// PriorityClasses and NamespaceLabels from the PodSource on each pass.
	Rank   rank.Options
	Decide decide.Options
	// Housekeeping is the longest wait between observations.
	Housekeeping time.Duration
	// Adaptive shrinks the wait near thresholds (Poll) and after event
	// wake-ups; off, the loop observes every Housekeeping (the kubelet's way).
	Adaptive bool
	Poll     wakeup.PollPolicy
	// EventFillRate replaces Poll.AssumedFillRate for a signal whose hard
	// threshold crossing an event source reports (Arming.EventDriven): the
	// poll then only has to catch the slower fills the event would not.
	EventFillRate float64
	// Burst is how long the loop polls at Poll.Min after an event wake-up.
	Burst    time.Duration
	InFlight inflight.Options
	// MaxAttempts bounds the eviction calls of one pass for one resource
	// (a refusal moves on to the next candidate); PodDisruptionBudget
	// refusals are bounded further, episode.PDBProbes in a row before a
	// pause (episode.PDBRefused).
	MaxAttempts int
	// PDBRecheck is how long a PodDisruptionBudget refusal is trusted before
	// the pod is asked about again the first time; it doubles with each
	// refusal in an episode, up to 8× (episode.PDBRefused), and the pod
	// waits for the other candidates to be asked first (episode.SweepDue).
	PDBRecheck time.Duration
	// RefusedRecheck is how long the API server's refusal of a pod's
	// eviction (an admission policy or webhook) is trusted; zero means
	// DefaultRefusedRecheck.
	RefusedRecheck time.Duration
	// FailureBackoff is the first pause after a failed eviction call,
	// doubling up to MaxFailureBackoff.
	FailureBackoff, MaxFailureBackoff time.Duration
	// WarnEvery is the least time between two Warn lines about the same
	// observation problem.
	WarnEvery time.Duration
	// ExpectImageGC counts the node's unused images as node-level reclaim
	// on the image filesystem's bytes signals (decide.Input.NodeReclaim).
	ExpectImageGC bool
}

// Deps are the loop's collaborators.
type Deps struct {
	Observer Observer
	Waker    Waker
	Pods     PodSource
	Evictor  Evictor
	// Arming may be nil (no event-driven sources).
	Arming  Arming
	Metrics *metrics.Metrics
	Log     *zap.Logger
	Clock   clock.Clock
	// PassClock, when not nil, is the clock the loop's goroutine reads
	// during a pass (a replay's recorded readings); nil: Clock, each
	// reading recorded in Trace (passClock).
	PassClock clock.PassiveClock
	// Families are the signal families the loop evaluates beside the
	// Summary's signals; nil: those the thresholds name
	// (family.Configured).
	Families []family.Family
	// Actuator, when not nil, contains hard memory victims once their
	// eviction is accepted and relaxes containers stuck at memory.high
	// (--actuator); PodEvents leaves its Events (nil: none).
	Actuator  Actuator
	PodEvents PodEventer
	// Go runs an eviction call; nil runs it on a goroutine of its own, so
	// that observing and deciding go on while the API server is slow.
	// Tests pass a synchronous runner for scripted, repeatable passes.
	Go func(func())
	// Acting reports whether this agent may act on the node (it holds the
	// node lease: pkg/nodelease); nil: always. While it may not, the loop
	// only observes: no eviction, no EvictionRequest, no actuator write, no
	// Event.
	Acting func() bool
	// Features are the optional parts that follow the pass (package
	// feature): the node brake, shadow mode. The outrun warning is every
	// agent's, and registered here (NewLoop).
	Features []feature.Feature
	// Trace, when not nil, records each pass for a replay (pkg/trace).
	Trace Tracer
	// Replay, when not nil, is a replay's player (pkg/trace/play): it
	// numbers the passes and calls as the recorded agent's were, and
	// delivers the recorded answers where the recorded pass took them.
	Replay Replayer
}

// Replayer drives a loop through a recorded trace (*play.Player).
type Replayer interface {
	// FirstCall is the number of the last call made before the trace
	// began: the loop's calls are numbered on from it.
	FirstCall() uint64
	// PassNumber is the number of the pass about to run.
	PassNumber() uint64
	// BeforeDrain delivers, before the loop's drain at point of the pass,
	// the answers the recorded pass took there.
	BeforeDrain(point int)
}
