// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/pressure"
)

// DefaultBudget is the bytes a trace keeps by default (compressed, but for
// the chunk being written).
const DefaultBudget = 4 << 20

// MinBudget is the least budget that keeps a useful trace, MaxBudget the
// most an agent may keep.
const (
	MinBudget = 64 << 10
	MaxBudget = 256 << 20
)

// chunks is how many parts the budget is cut in: the oldest goes whole
// when the budget is reached, so a trace keeps at least (chunks-1)/chunks
// of it.
const chunks = 8

// Recorder keeps the trace of a running loop. Begin, Drained, Deleted,
// Observed, PodState, Launched and End are called from the loop's goroutine, in that
// order within a pass; Size and WriteTo from any.
type Recorder struct {
	chunkMax, budget int

	// The loop's goroutine's.
	cur      *Pass
	obs      *pressure.Observation
	lastPods *Pods
	// lastSeen are the pod objects lastPods copied: an informer's cache
	// hands out the same object until the pod changes. curSeen are the
	// current pass's, until it is written.
	lastSeen, curSeen []*v1.Pod

	mu           sync.Mutex
	header       Header
	sealed       [][]byte // gzip members, oldest first
	sealedPasses []int
	sealedBytes  int
	open         bytes.Buffer
	openPasses   int
	dropped      uint64
	// fresh: the next pass with a pod list records it whole (it may begin
	// the trace once older chunks are dropped).
	fresh bool
}

// NewRecorder records within budget bytes (at least MinBudget), under h.
func NewRecorder(h Header, budget int) *Recorder {
	budget = max(budget, MinBudget)
	h.Format = Format
	return &Recorder{header: h, budget: budget, chunkMax: budget / chunks, fresh: true}
}

// Begin starts pass n, woken by w at at, after the agent's first calls
// eviction calls; a pass begun and not ended is dropped.
func (r *Recorder) Begin(n, calls uint64, at time.Time, w Wakeup) {
	r.cur = &Pass{N: n, At: at, Calls: calls, Wakeup: w}
	r.obs, r.curSeen = nil, nil
}

// Deleted records a pod deletion the pass took note of.
func (r *Recorder) Deleted(d Deletion) {
	if r.cur != nil {
		r.cur.Deleted = append(r.cur.Deleted, d)
	}
}

// Launched records an eviction call the pass made (its decision).
func (r *Recorder) Launched(c Call) {
	if r.cur != nil {
		r.cur.Launched = append(r.cur.Launched, c)
	}
}

// Drained records the answers the pass took at point.
func (r *Recorder) Drained(point int, calls []Call) {
	if r.cur == nil || len(calls) == 0 {
		return
	}
	r.cur.Drains = append(r.cur.Drains, Drain{Point: point, Calls: calls})
}

// Observed records the observer's answer, as it returned it: obs is
// copied at once, shallowly, since the signal families append to its
// SignalErrors later in the pass.
func (r *Recorder) Observed(obs *pressure.Observation, err error, at time.Time, acting bool) {
	if r.cur == nil {
		return
	}
	r.cur.Acting, r.cur.ObservedAt = acting, at
	if err != nil {
		r.cur.ObserveError = err.Error()
		return
	}
	cp := *obs
	cp.SignalErrors = slices.Clip(obs.SignalErrors)
	r.obs = &cp
}

// PodState records the pod list and what goes with it, when it differs
// from the last recorded (or a chunk begins).
func (r *Recorder) PodState(pods []*v1.Pod, classes map[string]int32, nsLabels map[string]map[string]string, node *v1.Node) {
	if r.cur == nil || r.cur.Pods != nil {
		return
	}
	r.mu.Lock()
	fresh := r.fresh
	r.mu.Unlock()
	if !fresh && r.lastPods != nil && samePods(r.lastPods, r.lastSeen, pods, classes, nsLabels, node) {
		return
	}
	r.curSeen = slices.Clone(pods)
	p := &Pods{PriorityClasses: maps.Clone(classes), NamespaceLabels: maps.Clone(nsLabels), Node: trimNode(node)}
	p.Pods = make([]*v1.Pod, len(pods))
	for i, pod := range pods {
		cp := *pod
		cp.ManagedFields = nil // the bulk of a pod's bytes, read by no decision
		p.Pods[i] = &cp
	}
	r.cur.Pods = p
}

// End writes the pass.
func (r *Recorder) End() {
	if r.cur == nil {
		return
	}
	p := r.cur
	p.Observation = r.obs
	if p.Observation != nil {
		p.ObservationNanos = nanos(p.Observation.Summary)
	}
	r.cur, r.obs = nil, nil
	b, err := json.Marshal(line{Pass: p})
	if err != nil {
		return // nothing in a pass fails to encode; if it did, the pass is left out
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open.Write(b)
	r.open.WriteByte('\n')
	r.openPasses++
	// Only a pod list written is one later passes may refer to.
	if p.Pods != nil {
		r.lastPods, r.lastSeen, r.fresh = p.Pods, r.curSeen, false
	}
	if r.open.Len() >= r.chunkMax {
		r.sealLocked()
	}
	for len(r.sealed) > 0 && r.sealedBytes+r.open.Len() > r.budget {
		r.sealedBytes -= len(r.sealed[0])
		r.dropped += uint64(r.sealedPasses[0])
		r.sealed, r.sealedPasses = r.sealed[1:], r.sealedPasses[1:]
	}
}

func (r *Recorder) sealLocked() {
	b := gz(r.open.Bytes())
	r.sealed = append(r.sealed, b)
	r.sealedPasses = append(r.sealedPasses, r.openPasses)
	r.sealedBytes += len(b)
	r.open.Reset()
	r.openPasses = 0
	r.fresh = true
}

// Size is the bytes the trace holds now.
func (r *Recorder) Size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sealedBytes + r.open.Len()
}

// WriteTo writes the trace as gzipped JSON lines (several gzip members,
// which gzip readers read as one stream): the header, then the passes.
func (r *Recorder) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	h := r.header
	h.Dropped = r.dropped
	h.Passes = r.openPasses
	for _, n := range r.sealedPasses {
		h.Passes += n
	}
	parts := slices.Clone(r.sealed)
	open := bytes.Clone(r.open.Bytes())
	r.mu.Unlock()

	hb, err := json.Marshal(line{Header: &h})
	if err != nil {
		return 0, err
	}
	parts = slices.Insert(parts, 0, gz(append(hb, '\n')))
	if len(open) > 0 {
		parts = append(parts, gz(open))
	}
	var n int64
	for _, p := range parts {
		k, err := w.Write(p)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return out.Bytes()
}

// samePods reports whether the pod list and the rest are those of last:
// the same pod objects (seen), at the same resource versions.
func samePods(last *Pods, seen, pods []*v1.Pod, classes map[string]int32, nsLabels map[string]map[string]string, node *v1.Node) bool {
	if len(seen) != len(pods) || !maps.Equal(last.PriorityClasses, classes) ||
		!maps.EqualFunc(last.NamespaceLabels, nsLabels, maps.Equal) || (last.Node == nil) != (node == nil) ||
		(node != nil && last.Node.ResourceVersion != node.ResourceVersion) {
		return false
	}
	for i, p := range pods {
		if seen[i] != p || last.Pods[i].ResourceVersion != p.ResourceVersion {
			return false
		}
	}
	return true
}

// trimNode keeps what the loop reads of the node: its name and images.
func trimNode(n *v1.Node) *v1.Node {
	if n == nil {
		return nil
	}
	out := &v1.Node{}
	out.Name, out.UID, out.ResourceVersion = n.Name, n.UID, n.ResourceVersion
	out.Status.Images = n.Status.Images
	return out
}
