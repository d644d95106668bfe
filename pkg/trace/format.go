// SPDX-License-Identifier: Apache-2.0

// Package trace is the agent's flight recorder: what each pass of the loop
// observed (the node's figures, the pod list, the wake-up, the pods the
// informer saw deleted), the eviction calls it made with their answers and
// the clock readings its decisions took, kept within a byte budget and
// exported as gzipped JSON lines, so that a replay (`evictd replay`, whose
// player is package play) can run the same decisions again offline, on the
// trace's own clock, with the same or another configuration.
package trace

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/pressure"
)

// Format is the version of the trace's JSON lines a recorder writes. 2: a
// pass may leave out its observation's pods (ObservationPodsAsBefore). 3:
// the pods are pruned to what the decisions read (PrunePod); the lines'
// shape is format 2's, so a reader reads both (MinFormat), and a format 2
// trace's whole pods replay as their pruned selves would. 4: a pass keeps
// the clock readings its decisions took (Readings), and a pass that
// switched to thresholds placed anew above the kubelet's keeps that
// placement (Placed); a reader reads formats 2 and 3 too, whose passes
// have neither. 5: the header keeps the placement the agent started with
// (Start: the thresholds it got, and every input placement read, the image
// collection's thresholds and the disk layout included), and a pass keeps
// every placement made while the agent ran, also one that moved none of
// its thresholds (another configuration may move).
const Format = 5

// FormatReadings is the first format whose passes keep their readings.
const FormatReadings = 4

// FormatStart is the first format whose header keeps the start's placement
// whole (Start) and whose passes keep every placement.
const FormatStart = 5

// MinFormat is the oldest format a reader reads.
const MinFormat = 2

// Header is a trace's first line: what the replay needs to build the
// recorded agent's configuration again.
type Header struct {
	Format  int       `json:"format"`
	Node    string    `json:"node"`
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started"`
	// Args are `evictd run`'s flags as the agent got them.
	Args []string `json:"args"`
	// Config is the content of the --config file ("" when none).
	Config string `json:"config,omitempty"`
	// Start is the agent's thresholds at start and what they were placed
	// against (from format 5; nil before).
	Start *Placement `json:"start,omitempty"`
	// KubeletHard and Capacity are what formats 2 to 4 kept of the start's
	// placement: the kubelet's hard thresholds as read (nil when not read)
	// and each signal's capacity. Format 5 keeps them in Start.
	KubeletHard map[string]string `json:"kubeletHard,omitempty"`
	Capacity    map[string]int64  `json:"capacity,omitempty"`
	// Passes is how many passes the export holds, Dropped how many older
	// ones the byte budget let go (then the trace begins mid-run).
	Passes  int    `json:"passes"`
	Dropped uint64 `json:"dropped,omitempty"`
}

// Pass is one pass of the loop, one line.
type Pass struct {
	N  uint64    `json:"n"`
	At time.Time `json:"at"`
	// Calls is how many eviction calls the agent had made before the pass.
	Calls uint64 `json:"calls"`
	// Wakeup is what woke the pass.
	Wakeup Wakeup `json:"wakeup"`
	// Deleted are the pods the informer saw deleted since the last pass
	// began, in order.
	Deleted []Deletion `json:"deleted,omitempty"`
	// Launched are the eviction calls the pass made (their decisions;
	// the answers come in Drains, of this pass or a later one).
	Launched []Call `json:"launched,omitempty"`
	// Drains are the eviction calls' answers the pass took, at each point
	// it took them: 0 at its start, k after its k-th call.
	Drains []Drain `json:"drains,omitempty"`
	// Acting: the agent held the node's lease.
	Acting bool `json:"acting"`
	// Observation is what the observer returned (before the signal
	// families added to it); ObserveError when it failed instead.
	Observation  *pressure.Observation `json:"observation,omitempty"`
	ObserveError string                `json:"observeError,omitempty"`
	ObservedAt   time.Time             `json:"observedAt,omitzero"`
	// ObservationNanos are the sub-second parts of the observation's
	// Summary timestamps, which its JSON drops (nanos.go).
	ObservationNanos []int32 `json:"observationNanos,omitempty"`
	// ObservationPodsAsBefore: the observer reused the pods' figures of
	// an earlier pass (Observation.PodsAge), and the line leaves them out:
	// they are those of the last pass that wrote them. Read puts them back.
	ObservationPodsAsBefore bool `json:"observationPodsAsBefore,omitempty"`
	// Pods is the informer's view the pass decided on; nil when the same
	// as the last pass that had one (or when the pass read none).
	Pods *Pods `json:"pods,omitempty"`
	// Readings are the clock readings the loop took during the pass, in
	// the order it took them (the pacing, the observation's start and end,
	// the threshold tracker, the rate limits, deadlines and back-offs it
	// checked, each call's launch), each as nanoseconds after the one
	// before (the first after At): small numbers, which compress well. A
	// replay decides with them (ReadingTimes), so it decides with the times
	// the agent decided with, however long the agent's pass took.
	Readings []int64 `json:"readings,omitempty"`
	// Placed is the placement the pass switched to at its start, when
	// evictd placed its thresholds anew above the kubelet's while it ran
	// (the kubelet restarted with others, or a capacity a percentage
	// needed became known), or the one in force, Carried, at the first pass
	// of a part of the trace; nil in the other passes.
	Placed *Placement `json:"placed,omitempty"`
}

// Placement is evictd's thresholds placed above the kubelet's, at start
// (Header.Start) or anew while the agent ran: every input placement read,
// for a replay to place its own configuration against again, and the
// thresholds the agent got, for a replay with the agent's configuration to
// check its own against.
type Placement struct {
	// Thresholds are the thresholds the agent decided with from this pass
	// on, as their String forms.
	Thresholds []string `json:"thresholds"`
	// KubeletRead: the kubelet's thresholds were read, and evictd placed
	// its own against them (format 5 on; before, KubeletHard not nil says
	// so). False with --kubelet-thresholds=ignore or a failed read: then
	// nothing was placed.
	KubeletRead bool `json:"kubeletRead,omitempty"`
	// KubeletHard is the kubelet's hard thresholds as read, as its map
	// spells them; nil when they could not be read.
	KubeletHard map[string]string `json:"kubeletHard,omitempty"`
	// Capacity is each signal's capacity placement resolved mixed units
	// with, and DiskLayout the node's filesystems' layout (pkg/fslayout),
	// which bounds the disk thresholds by the image collection's: those of
	// the last pass's observation before the placement.
	Capacity   map[string]int64 `json:"capacity,omitempty"`
	DiskLayout string           `json:"diskLayout,omitempty"`
	// ImageGCHigh and ImageGCLow are the kubelet's image collection
	// thresholds, in percent, as read with KubeletHard (never 0 when read:
	// the kubelet's defaults fill them); in Start from format 5 on.
	ImageGCHigh int32 `json:"imageGCHigh,omitempty"`
	ImageGCLow  int32 `json:"imageGCLow,omitempty"`
	// Carried: the placement was made in an earlier pass and is repeated
	// here, at the first pass of a part of the trace, so that a trace whose
	// older passes were dropped for its size still has it (its header
	// keeps the start's only).
	Carried bool `json:"carried,omitempty"`
}

// ReadingTimes are the pass's clock readings as times (none before format
// 4).
func (p *Pass) ReadingTimes() []time.Time {
	if len(p.Readings) == 0 {
		return nil
	}
	out := make([]time.Time, len(p.Readings))
	t := p.At
	for i, d := range p.Readings {
		t = t.Add(time.Duration(d))
		out[i] = t
	}
	return out
}

// readingAfter is t as a Readings entry after prev: wall clock against
// wall clock, as the trace keeps times (a monotonic reading does not
// survive its JSON).
func readingAfter(prev, t time.Time) int64 {
	return int64(t.Round(0).Sub(prev.Round(0)))
}

// Wakeup is a pkg/pressure/wakeup Wakeup.
type Wakeup struct {
	Source string    `json:"source"`
	Name   string    `json:"name,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// Deletion is a pod the informer saw deleted.
type Deletion struct {
	At        time.Time `json:"at"`
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
}

// Pods is the API server's view of the node, as the loop read it.
type Pods struct {
	// Pods are the node's pods, each pruned to what the decisions read
	// (PrunePod; whole but for managedFields in format 2).
	Pods            []*v1.Pod                    `json:"pods"`
	PriorityClasses map[string]int32             `json:"priorityClasses,omitempty"`
	NamespaceLabels map[string]map[string]string `json:"namespaceLabels,omitempty"`
	// Node is the node's object as far as the loop reads it (its images);
	// nil when unknown.
	Node *v1.Node `json:"node,omitempty"`
}

// Drain is the answers taken at one point of a pass.
type Drain struct {
	Point int    `json:"point"`
	Calls []Call `json:"calls"`
}

// Call is an eviction call and its answer.
type Call struct {
	// Seq numbers the agent's calls from 1, in the order it made them.
	Seq uint64 `json:"seq"`
	Decision
	// The answer: when it came, the outcome, and the error's text and kind.
	At                 time.Time     `json:"at"`
	Result             string        `json:"result"`
	GracePeriodSeconds int64         `json:"gracePeriodSeconds"`
	Accepted           time.Time     `json:"accepted,omitzero"`
	RetryAfter         time.Duration `json:"retryAfter,omitempty"`
	Attempts           int           `json:"attempts,omitempty"`
	Cached             bool          `json:"cached,omitempty"`
	Error              string        `json:"error,omitempty"`
	// ErrorKind names an error the loop tells apart (ErrorEpisodeCap,
	// ErrorCanceled); "" for any other.
	ErrorKind string `json:"errorKind,omitempty"`
}

// Decision is what an eviction call asked for and why: what a replay
// makes again.
type Decision struct {
	// Pass is the pass that made the call, at Launched.
	Pass      uint64    `json:"pass"`
	Launched  time.Time `json:"launched"`
	Pod       string    `json:"pod"`
	UID       types.UID `json:"uid"`
	Signal    string    `json:"signal"`
	Hard      bool      `json:"hard"`
	Force     bool      `json:"force,omitempty"`
	Rank      int       `json:"rank"`
	Reason    string    `json:"reason"`
	RunnerUp  string    `json:"runnerUp,omitempty"`
	Threshold int64     `json:"threshold"`
	Available int64     `json:"available"`
	Usage     int64     `json:"usage"`
	// PredictedIn is, for an early call, how soon the crossing was
	// predicted.
	PredictedIn time.Duration `json:"predictedIn,omitempty"`
}

// Error kinds of Call.
const (
	ErrorEpisodeCap = "episode-cap"
	ErrorCanceled   = "canceled"
)

// line is one JSON line of a trace: a header or a pass.
type line struct {
	Header *Header `json:"header,omitempty"`
	Pass   *Pass   `json:"pass,omitempty"`
}
