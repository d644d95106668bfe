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

// DefaultBudget is the bytes a trace keeps by default, compressed, outside
// Go's heap (offheap_linux.go). The recorder's working memory comes on top,
// on the heap: its compressor (1.1 MiB), the open chunk's buffer and the
// last pod list it recorded (TestHeapBeyondChunks).
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
// Placed, Observed, PodState, Launched and End are called from the loop's goroutine, in that
// order within a pass, and Reading between Begin and End; Size and WriteTo from any.
type Recorder struct {
	chunkMax, budget int

	// The loop's goroutine's.
	cur *Pass
	// lastReading is the current pass's last clock reading (At before
	// its first).
	lastReading time.Time
	obs         *pressure.Observation
	lastPods    *Pods
	// lastSeen are the pod objects lastPods copied: an informer's cache
	// hands out the same object until the pod changes. curSeen are the
	// current pass's, until it is written.
	lastSeen, curSeen []*v1.Pod
	// curSame: the current pass's pod list is lastPods (PodState found it
	// so and recorded nothing).
	curSame bool
	// placed is the last placement recorded, which each chunk's first pass
	// repeats.
	placed *Placement

	mu     sync.Mutex
	header Header
	// sealed are the closed chunks, oldest first.
	sealed      []chunk
	sealedBytes int
	// open is the member being written, through zw: passes are compressed
	// as they are written, so a chunk is bounded by what it keeps, and one
	// compressor serves every chunk (a gzip writer is 1.1 MiB of heap; one
	// a chunk was most of the recorder's garbage).
	open       bytes.Buffer
	zw         *gzip.Writer
	enc        *json.Encoder
	openPasses int
	openFirst  time.Time
	dropped    uint64
	// obsPodsAt is when the pods' figures last written whole in the open
	// chunk were read (zero: none yet): a later pass that reused them
	// leaves them out (leaveOutReusedPods).
	obsPodsAt time.Time
	// fresh: the next pass with a pod list records it whole (it may begin
	// the trace once older chunks are dropped).
	fresh bool
}

// chunk is a closed gzip member of passes.
type chunk struct {
	b      []byte
	mapped bool // b is outside Go's heap (newChunk): free it when dropped
	passes int
	first  time.Time // its first pass's
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
	r.lastReading = at
	r.obs, r.curSeen, r.curSame = nil, nil, false
}

// Deleted records a pod deletion the pass took note of.
func (r *Recorder) Deleted(d Deletion) {
	if r.cur != nil {
		r.cur.Deleted = append(r.cur.Deleted, d)
	}
}

// Reading records a clock reading the pass took (outside a pass, none).
func (r *Recorder) Reading(t time.Time) {
	if r.cur != nil {
		r.cur.Readings = append(r.cur.Readings, readingAfter(r.lastReading, t))
		r.lastReading = t
	}
}

// Placed records the thresholds placed anew that the pass switched to.
func (r *Recorder) Placed(p Placement) {
	if r.cur != nil {
		r.cur.Placed = &p
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
		r.curSame = true
		return
	}
	r.curSeen = slices.Clone(pods)
	p := &Pods{PriorityClasses: maps.Clone(classes), NamespaceLabels: podNamespaceLabels(pods, nsLabels), Node: trimNode(node)}
	p.Pods = r.prunePods(pods)
	r.cur.Pods = p
}

// prunePods is pods pruned (PrunePod), reusing the pruned copy of each pod
// object the last recorded list had at the same resource version: a list
// changes a pod or two at a time, and pruning the whole list again each
// time was most of a changed list's cost.
func (r *Recorder) prunePods(pods []*v1.Pod) []*v1.Pod {
	var last map[*v1.Pod]*v1.Pod
	if r.lastPods != nil && len(r.lastSeen) == len(r.lastPods.Pods) {
		last = make(map[*v1.Pod]*v1.Pod, len(r.lastSeen))
		for i, seen := range r.lastSeen {
			last[seen] = r.lastPods.Pods[i]
		}
	}
	out := make([]*v1.Pod, len(pods))
	for i, pod := range pods {
		if pruned, ok := last[pod]; ok && pruned.ResourceVersion == pod.ResourceVersion {
			out[i] = pruned
			continue
		}
		out[i] = PrunePod(pod)
	}
	return out
}

// End writes the pass.
func (r *Recorder) End() {
	if r.cur == nil {
		return
	}
	p := r.cur
	p.Observation = r.obs
	r.cur, r.obs = nil, nil
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leaveOutReusedPods(p)
	if p.Observation != nil {
		p.ObservationNanos = nanos(p.Observation.Summary)
	}
	switch {
	case p.Placed != nil:
		r.placed = p.Placed
	case r.openPasses == 0 && r.placed != nil:
		// A chunk begins: it may become the trace's first once the older
		// ones are dropped, and the thresholds in force must not go with
		// them (as its pod list must not).
		cp := *r.placed
		cp.Carried = true
		p.Placed = &cp
	}
	if r.fresh && r.curSame {
		// An export sealed the chunk between PodState and now: the pass
		// begins a chunk, which must hold the pod list, the last one's.
		p.Pods, r.curSeen = r.lastPods, r.lastSeen
	}
	if r.zw == nil {
		// Room for a chunk and the block that ends it, once: a buffer left to
		// grow by itself doubles past the chunk it holds. Past a MiB (budgets
		// over 8 MiB) it grows as passes come rather than all at start.
		r.open.Grow(min(r.chunkMax+r.chunkMax/8, 1<<20))
		r.zw, _ = gzip.NewWriterLevel(&r.open, gzip.BestSpeed) // a valid level: no error
		r.enc = json.NewEncoder(r.zw)
	}
	// The encoder marshals the whole line before it writes any of it, and
	// writes to a bytes.Buffer do not fail.
	if err := r.enc.Encode(line{Pass: p}); err != nil {
		return // nothing in a pass fails to encode; if it did, the pass is left out
	}
	if r.openPasses == 0 {
		r.openFirst = p.At
	}
	r.openPasses++
	if o := p.Observation; o != nil && !p.ObservationPodsAsBefore {
		r.obsPodsAt = o.Time.Add(-o.PodsAge)
	}
	// Only a pod list written is one later passes may refer to.
	if p.Pods != nil {
		r.lastPods, r.lastSeen, r.fresh = p.Pods, r.curSeen, false
	}
	if r.open.Len() >= r.chunkMax {
		r.sealLocked()
	}
	r.trimLocked()
}

// sealLocked closes the open member and keeps it whole.
func (r *Recorder) sealLocked() {
	_ = r.zw.Close() // to a bytes.Buffer: no error
	b, mapped := newChunk(r.open.Len())
	copy(b, r.open.Bytes())
	r.sealed = append(r.sealed, chunk{b: b, mapped: mapped, passes: r.openPasses, first: r.openFirst})
	r.sealedBytes += len(b)
	r.open.Reset()
	r.zw.Reset(&r.open)
	r.openPasses = 0
	r.fresh = true
	r.obsPodsAt = time.Time{}
}

// leaveOutReusedPods takes out of p's observation the pods' figures that
// the observer reused from a pass already in the open chunk: at a hundred
// pods they are most of a line, and most passes away from pressure reuse
// them (pressure.PodReads).
func (r *Recorder) leaveOutReusedPods(p *Pass) {
	o := p.Observation
	if o == nil || o.PodsAge <= 0 || r.obsPodsAt.IsZero() || !r.obsPodsAt.Equal(o.Time.Add(-o.PodsAge)) {
		return
	}
	cp, sum := *o, *o.Summary
	sum.Pods, cp.Pods, cp.Summary = nil, nil, &sum
	p.Observation, p.ObservationPodsAsBefore = &cp, true
}

// trimLocked drops the oldest chunks until the trace is within its budget.
func (r *Recorder) trimLocked() {
	for len(r.sealed) > 0 && r.sealedBytes+r.open.Len() > r.budget {
		c := r.sealed[0]
		r.sealedBytes -= len(c.b)
		r.dropped += uint64(c.passes)
		if c.mapped {
			freeChunk(c.b)
		}
		r.sealed[0] = chunk{}
		r.sealed = r.sealed[1:]
	}
}

// Size is the compressed bytes the trace holds now (those of the open
// chunk that its compressor has not yet written out aside).
func (r *Recorder) Size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sealedBytes + r.open.Len()
}

// Oldest is the time of the oldest pass the trace holds (zero when none):
// how far back a replay of it can go.
func (r *Recorder) Oldest() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case len(r.sealed) > 0:
		return r.sealed[0].first
	case r.openPasses > 0:
		return r.openFirst
	}
	return time.Time{}
}

// WriteTo writes the trace as gzipped JSON lines (several gzip members,
// which gzip readers read as one stream): the header, then the passes. It
// seals the open chunk, so the next pass records the pod list again.
func (r *Recorder) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	if r.openPasses > 0 {
		r.sealLocked()
		r.trimLocked()
	}
	h := r.header
	h.Dropped = r.dropped
	// The chunks are copied while the lock is held: a pass may drop one,
	// and a dropped chunk's memory goes back to the kernel, while the copy
	// goes to a reader at the reader's pace.
	body := make([]byte, 0, r.sealedBytes)
	for _, c := range r.sealed {
		h.Passes += c.passes
		body = append(body, c.b...)
	}
	r.mu.Unlock()

	hb, err := json.Marshal(line{Header: &h})
	if err != nil {
		return 0, err
	}
	n, err := w.Write(gz(append(hb, '\n')))
	if err != nil {
		return int64(n), err
	}
	k, err := w.Write(body)
	return int64(n + k), err
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
	if len(seen) != len(pods) || !maps.Equal(last.PriorityClasses, classes) || (last.Node == nil) != (node == nil) ||
		(node != nil && last.Node.ResourceVersion != node.ResourceVersion) {
		return false
	}
	for i, p := range pods {
		if seen[i] != p || last.Pods[i].ResourceVersion != p.ResourceVersion {
			return false
		}
	}
	// The same pods: the same namespaces, whose labels last kept.
	for _, p := range pods {
		l, ok := nsLabels[p.Namespace]
		if k, had := last.NamespaceLabels[p.Namespace]; ok != had || !maps.Equal(l, k) {
			return false
		}
	}
	return true
}

// podNamespaceLabels is nsLabels for the namespaces pods are in: a
// decision reads a namespace's labels only for its pods (a priority
// group's selector), and the trace has no use for the rest of the
// cluster's.
func podNamespaceLabels(pods []*v1.Pod, nsLabels map[string]map[string]string) map[string]map[string]string {
	if nsLabels == nil {
		return nil
	}
	out := map[string]map[string]string{}
	for _, p := range pods {
		if l, ok := nsLabels[p.Namespace]; ok {
			out[p.Namespace] = l
		}
	}
	return out
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
