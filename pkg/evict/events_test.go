// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/evictd/evictd/pkg/kube/fromclientset"
)

// writerWith returns an EventWriter on a fake clientset whose event creates
// go through react first (nil: plain success).
func writerWith(t *testing.T, react func(n int64) error) (*EventWriter, *fake.Clientset, *observer.ObservedLogs) {
	t.Helper()
	client := fake.NewClientset()
	var n atomic.Int64
	if react != nil {
		client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			if err := react(n.Add(1)); err != nil {
				return true, nil, err
			}
			return false, nil, nil // let the tracker store it
		})
	}
	core, logs := observer.New(zapcore.DebugLevel)
	w := NewEventWriter(fromclientset.Wrap(client), "evictd-"+node, zap.New(core), nil)
	return w, client, logs
}

func countEvents(t *testing.T, client *fake.Clientset) int {
	t.Helper()
	list, err := client.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestEventWriterFlushesOnShutdown(t *testing.T) {
	w, client, _ := writerWith(t, func(int64) error { time.Sleep(2 * time.Millisecond); return nil })
	for i := range 20 {
		w.Emit(podRef(testPod("p"+string(rune('a'+i)), nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "note")
	}
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := countEvents(t, client); got != 20 {
		t.Errorf("%d events written before Shutdown returned, want 20", got)
	}
}

func TestEventWriterShutdownDeadline(t *testing.T) {
	w, client, _ := writerWith(t, func(int64) error { time.Sleep(300 * time.Millisecond); return nil })
	for _, name := range []string{"a", "b", "c"} {
		w.Emit(podRef(testPod(name, nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "note")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// It waits only for the call in flight (the fake ignores cancellation):
	// the other two are counted, not written.
	err := w.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "2 events unwritten") {
		t.Fatalf("Shutdown past its deadline: %v, want an error counting 2 unwritten events", err)
	}
	if got := countEvents(t, client); got != 1 {
		t.Errorf("%d events written, want only the one in flight", got)
	}
}

func TestEventWriterRetriesTransientErrors(t *testing.T) {
	w, client, logs := writerWith(t, func(n int64) error {
		switch n {
		case 1:
			return err503 // transient: retried
		case 3:
			return err403 // a refusal: final, logged
		}
		return nil
	})
	w.Emit(podRef(testPod("a", nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "first")
	w.Emit(podRef(testPod("b", nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "second")
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := countEvents(t, client); got != 1 {
		t.Errorf("%d events written, want 1 (the retried one)", got)
	}
	if n := logs.FilterMessage("could not write event").Len(); n != 1 {
		t.Errorf("%d 'could not write event' logs, want 1", n)
	}
}

func TestEventWriterAfterShutdown(t *testing.T) {
	w, client, logs := writerWith(t, nil)
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Emit(podRef(testPod("late", nil)), v1.EventTypeWarning, ReasonEvicted, actionEvict, "too late")
	if err := w.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if countEvents(t, client) != 0 || logs.FilterMessageSnippet("writer shut down").Len() != 1 {
		t.Error("an event emitted after Shutdown must be dropped and logged")
	}
}
