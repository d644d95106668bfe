// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// runWatch follows one run of the race or of the peers' bench in a
// namespace: the first fate the watch sees of each pod, in order, with the
// pod's UID, and memory.available read every period, until stop. A watch,
// not polls: two pods ended within one poll would come in the listing's
// order, and a pod deleted at once would not come at all.
type runWatch struct {
	mu      sync.Mutex
	ends    []PodFate
	uids    map[string]string // pod name -> UID
	samples []MemorySample
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// watchRun starts following ns, and the namespaces also. fateOf says who
// ended a pod as an event shows it ("" for nobody yet); available reads
// memory.available.
func watchRun(t *testing.T, n *Node, ns string, fateOf func(*corev1.Pod, watch.EventType) string,
	available func(context.Context, *Node) (int64, error), period time.Duration, also ...string) *runWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	namespaces := append([]string{ns}, also...)
	watchNS := ns
	if len(also) > 0 {
		watchNS = metav1.NamespaceAll
	}
	w, err := n.Cluster.Admin.CoreV1().Pods(watchNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &runWatch{uids: map[string]string{}, cancel: cancel}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		defer w.Stop()
		seen := map[string]bool{}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				p, isPod := ev.Object.(*corev1.Pod)
				if !isPod || ev.Type == watch.Error || !slices.Contains(namespaces, p.Namespace) {
					continue
				}
				by := fateOf(p, ev.Type)
				r.mu.Lock()
				r.uids[p.Name] = string(p.UID)
				if by != "" && !seen[p.Name] {
					seen[p.Name] = true
					r.ends = append(r.ends, PodFate{Pod: p.Name, By: by, At: time.Now()})
				}
				r.mu.Unlock()
			}
		}
	}()
	go func() {
		defer r.wg.Done()
		for ctx.Err() == nil {
			at := time.Now()
			if a, err := available(ctx, n); err == nil {
				r.mu.Lock()
				r.samples = append(r.samples, MemorySample{At: at.Add(time.Since(at) / 2), Available: a})
				r.mu.Unlock()
			}
			time.Sleep(period)
		}
	}()
	return r
}

// ended reports whether pod has met its fate yet.
func (r *runWatch) ended(pod string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.ends {
		if e.Pod == pod {
			return true
		}
	}
	return false
}

// waitEnded waits until pod has met its fate or timeout has passed, and
// reports which.
func (r *runWatch) waitEnded(pod string, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if r.ended(pod) {
			return true
		}
	}
	return r.ended(pod)
}

// stop ends the watch and the readings; ends, uids and samples are the
// run's from then on.
func (r *runWatch) stop() {
	r.cancel()
	r.wg.Wait()
}
