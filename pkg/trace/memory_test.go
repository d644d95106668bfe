// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
)

// heapLive is the heap's live bytes after two collections (the second
// empties sync.Pool's victim cache).
func heapLive() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHeapBeyondChunks: a full trace at 110 pods holds its chunks outside
// the heap; what stays on it is the recorder's working memory (the
// compressor, the open chunk, the last pod list), 2.3 MiB when written.
// With the chunks on the heap it was 6 MiB, and they cost twice the budget
// in resident memory (the garbage collector's goal is twice what is live).
func TestHeapBeyondChunks(t *testing.T) {
	const pods = 110
	f := newFigures(pods)
	list := makePods(pods)
	base := heapLive()
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	for n := uint64(1); r.dropped == 0 || n < 2*uint64(r.sealed[0].passes)+300; n++ {
		at := t0.Add(time.Duration(n) * time.Second)
		r.Begin(n, 0, at, Wakeup{Source: "timer"})
		r.Observed(makeObs(at, pods, f), nil, at, true)
		r.PodState(list, nil, nil, nil)
		r.End()
	}
	live := int64(heapLive()) - int64(base)
	t.Logf("trace %d bytes in %d chunks (%d passes dropped); heap beyond it %.2f MiB", r.Size(), len(r.sealed), r.dropped, float64(live)/(1<<20))
	if r.Size() < DefaultBudget*7/8 {
		t.Fatalf("the trace holds %d bytes: not full, the test measures nothing", r.Size())
	}
	if limit := int64(3 << 20); live > limit {
		t.Errorf("a full trace leaves %d bytes live on the heap, want at most %d: its chunks are on the heap again", live, limit)
	}
	runtime.KeepAlive(r)
}

// TestExportWhileRecording: exports taken while passes drop chunks (and
// give their memory back) read back whole, each a run of consecutive
// passes.
func TestExportWhileRecording(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, MinBudget)
	f := newFigures(20)
	list := makePods(20)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for n := uint64(1); n <= 1500; n++ {
			at := t0.Add(time.Duration(n) * time.Second)
			r.Begin(n, 0, at, Wakeup{Source: "timer"})
			r.Observed(makeObs(at, 20, f), nil, at, true)
			r.PodState(list, nil, nil, nil)
			r.End()
		}
	})
	exports := 0
	for recording := true; recording; exports++ {
		select {
		case <-done:
			recording = false // one export more, after the last pass
		default:
		}
		var buf bytes.Buffer
		if _, err := r.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		tr, err := Read(&buf)
		if err != nil {
			t.Fatalf("export %d: %v", exports, err)
		}
		for i := 1; i < len(tr.Passes); i++ {
			if tr.Passes[i].N != tr.Passes[i-1].N+1 {
				t.Fatalf("export %d: pass %d follows pass %d", exports, tr.Passes[i].N, tr.Passes[i-1].N)
			}
		}
	}
	wg.Wait()
	if tr, _ := export(t, r); tr.Header.Dropped == 0 || exports < 3 {
		t.Fatalf("%d exports, %d passes dropped: the test did not export while chunks were dropped", exports, tr.Header.Dropped)
	}
	t.Logf("%d exports while 1500 passes were recorded", exports)
}

// An export seals the open chunk; a pass that found its pod list the same
// as the last one's before the export, and ends after it, begins the next
// chunk and so carries the list (a trace whose older chunks are dropped
// must begin with one).
func TestExportBetweenPodStateAndEnd(t *testing.T) {
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	pods := makePods(3)
	r.Begin(1, 0, t0, Wakeup{Source: "timer"})
	r.PodState(pods, nil, nil, nil)
	r.End()
	r.Begin(2, 0, t0.Add(time.Second), Wakeup{Source: "timer"})
	r.PodState(pods, nil, nil, nil) // the same: nothing recorded
	if tr, _ := export(t, r); len(tr.Passes) != 1 {
		t.Fatalf("the first export has %d passes, want pass 1", len(tr.Passes))
	}
	r.End()
	r.Begin(3, 0, t0.Add(2*time.Second), Wakeup{Source: "timer"})
	r.PodState(pods, nil, nil, nil)
	r.End()
	tr, _ := export(t, r)
	if len(tr.Passes) != 3 || tr.Passes[1].Pods == nil || len(tr.Passes[1].Pods.Pods) != 3 || tr.Passes[2].Pods != nil {
		t.Fatalf("passes %+v: want pass 2 to begin its chunk with the pod list, pass 3 without", tr.Passes)
	}
	for _, p := range sealedFirstPasses(t, r) {
		if p.Pods == nil {
			t.Errorf("the chunk beginning with pass %d has no pod list", p.N)
		}
	}
}
