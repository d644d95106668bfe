// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/backoff"
	"github.com/evictd/evictd/pkg/logging"
)

// Event reasons and actions evictd writes.
const (
	// ReasonEvicted is on a pod evicted through the Eviction API, as the
	// kubelet's own evictions are.
	ReasonEvicted = "Evicted"
	// ReasonEvictedDespitePDB is on a pod deleted by ForceDelete.
	ReasonEvictedDespitePDB = "EvictedDespitePDB"
	// ReasonThresholdMet is on the Node when a threshold is first met (the
	// kubelet's reason for the same event).
	ReasonThresholdMet = "EvictionThresholdMet"
	// ReasonVictimStuck is on a pod evicted (or found terminating) that
	// outlived its grace period and evictd's wait for it: its reclaim no
	// longer counts and the next candidate may be evicted.
	ReasonVictimStuck = "EvictionStuck"
	// ReasonEvictionRefused is on a pod whose eviction the API server
	// refused for the pod itself (an admission policy or webhook, several
	// PodDisruptionBudgets): evictd went on to the next candidate.
	ReasonEvictionRefused = "EvictionRefused"
	// ReasonEvictionWebhookFailed is on a pod whose eviction failed because
	// an admission webhook that selects it (failurePolicy Fail) could not be
	// called; the note names the webhook. evictd went on to the next
	// candidate.
	ReasonEvictionWebhookFailed = "EvictionWebhookFailed"
	// ReasonPressureEnded is on the Node when a resource's pressure episode
	// ends: no threshold of it met for the pressure transition period.
	ReasonPressureEnded = "EvictionPressureEnded"
	// ReasonVictimContained is on a hard memory victim whose memory limit
	// the actuator (--actuator) set just above its usage once its eviction
	// was accepted: it shuts down, but cannot grow.
	ReasonVictimContained = "EvictionVictimContained"
	// ReasonMemoryHighRelaxed is on a pod one of whose containers, stuck at
	// memory.high, the actuator gave its memory.max as memory.high (stage 1
	// of docs/memhigh.md) instead of evicting it.
	ReasonMemoryHighRelaxed = "MemoryHighRelaxed"

	actionEvict  = "Evict"
	actionDelete = "Delete"
	actionNotice = "Reclaim"
	// ActionActuate is the action of the actuator's Events.
	ActionActuate = "Actuate"

	// ReportingController is the events.k8s.io reportingController.
	ReportingController = "evictd"
)

// Limits of events.k8s.io/v1 fields, from the API's validation.
const (
	maxNoteBytes     = 1024
	maxInstanceBytes = 128
)

// eventQueueSize bounds the Events waiting to be written. evictd writes one
// per eviction and one per threshold first met, so a full queue means the API
// server has been unreachable for long; new events are then dropped (and
// logged) rather than holding memory or blocking an eviction.
const eventQueueSize = 256

// eventWriteTimeout bounds one create call.
const eventWriteTimeout = 5 * time.Second

// The writer's back-off (package backoff: doubling, with jitter), kept
// across Events: a failed call makes the writer's next call wait, whichever
// Event it carries, so that a queue of Events meeting an API server that is
// away costs it a call per back-off, not three a second. While the server
// is away or sheds load (5xx, 429, no answer) the wait grows from
// eventRetryInitial to eventRetryMax, and an Event is given up after
// eventTries calls; while it refuses the writes (403, 422: a missing grant,
// an admission policy) each refused Event is dropped at once and the wait
// grows to eventRefusedRetryMax, the same refusal being likely for the
// next. A written Event starts both again.
const (
	eventRetryInitial    = time.Second
	eventRetryMax        = 30 * time.Second
	eventRefusedRetryMax = 5 * time.Minute
	eventTries           = 3
)

// EventWriter writes events.k8s.io/v1 Events from one goroutine, so that
// Shutdown can wait until the last ones are written before the process
// exits; client-go's broadcaster writes each event from a goroutine of its
// own that its Shutdown does not wait for.
//
// client-go's k8s.io/client-go/tools/events is not used: it needs a typed
// client and k8s.io/client-go/kubernetes/scheme, which registers every
// built-in API group at start. Measured on evictd with it (a broadcaster
// recording to a sink, idle in dry run): +11.4 MB of binary (+57 %) and
// +7.1 MiB of idle RSS (+34 %), docs/performance.md, "Libraries evictd does
// not take, and why".
type EventWriter struct {
	client   EventAPI
	instance string
	clock    clock.Clock
	log      *zap.Logger

	mu     sync.Mutex
	closed bool
	queue  chan *eventsv1.Event
	done   chan struct{}
	// dropped counts events abandoned by a Shutdown that ran out of time.
	dropped atomic.Int64
	// stop cancels the call in flight when Shutdown runs out of time.
	stop context.CancelFunc
	ctx  context.Context

	// The writer goroutine's own: the back-offs, the wait before its next
	// call, and whether a run of refusals has been logged.
	busy, refused backoff.Backoff
	pause         time.Duration
	refusing      bool
}

// EventAPI creates events.k8s.io/v1 Events; *kube.Client satisfies it.
type EventAPI interface {
	CreateEvent(ctx context.Context, ev *eventsv1.Event) error
}

// NewEventWriter starts a writer. instance names this evictd in the Events'
// reportingInstance: its install and its node (install.Instance), so that
// the Events of two installs' agents on one node are told apart; clk may
// be nil for the real clock. Call Shutdown before exiting.
func NewEventWriter(client EventAPI, instance string, log *zap.Logger, clk clock.Clock) *EventWriter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	if len(instance) > maxInstanceBytes {
		instance = instance[:maxInstanceBytes]
	}
	ctx, stop := context.WithCancel(context.Background())
	w := &EventWriter{
		client:   client,
		instance: instance,
		clock:    clk,
		log:      log,
		queue:    make(chan *eventsv1.Event, eventQueueSize),
		done:     make(chan struct{}),
		ctx:      ctx,
		stop:     stop,
		busy:     backoff.Backoff{Initial: eventRetryInitial, Max: eventRetryMax},
		refused:  backoff.Backoff{Initial: eventRetryInitial, Max: eventRefusedRetryMax},
	}
	go w.run()
	return w
}

// Emit queues an Event about regarding. It never blocks: when the queue is
// full or the writer is shut down, the event is dropped and logged.
func (w *EventWriter) Emit(regarding v1.ObjectReference, eventType, reason, action, note string) {
	now := w.clock.Now()
	ns := regarding.Namespace
	if ns == "" {
		// Events about cluster-scoped objects (the Node) live in default,
		// as the kubelet's do.
		ns = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// The name scheme of client-go's recorders: unique per object
			// and instant.
			Name:      fmt.Sprintf("%s.%x", regarding.Name, now.UnixNano()),
			Namespace: ns,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: ReportingController,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           regarding,
		Note:                truncate(note, maxNoteBytes),
		Type:                eventType,
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.log.Warn("event dropped: writer shut down", zap.String("reason", reason), zap.String("object", objectName(regarding)))
		return
	}
	select {
	case w.queue <- ev:
	default:
		w.log.Warn("event dropped: queue full", zap.String("reason", reason), zap.String("object", objectName(regarding)))
	}
}

func (w *EventWriter) run() {
	defer close(w.done)
	for ev := range w.queue {
		if w.ctx.Err() != nil {
			w.dropped.Add(1)
			continue
		}
		w.write(ev)
	}
}

// write creates ev, after the back-off the last failure left: tried again
// up to eventTries times while the server is away or busy, dropped at once
// when the server refuses it or answers about the Event itself (another
// 4xx).
func (w *EventWriter) write(ev *eventsv1.Event) {
	for attempt := 1; ; attempt++ {
		w.wait()
		ctx, cancel := context.WithTimeout(w.ctx, eventWriteTimeout)
		err := w.client.CreateEvent(ctx, ev)
		cancel()
		switch {
		case err == nil:
			if w.refusing {
				w.log.Info("events are written again", zap.String("reason", ev.Reason), zap.String("object", objectName(ev.Regarding)))
			}
			w.busy.Reset()
			w.refused.Reset()
			w.refusing = false
			return
		case refusedEvent(err):
			w.pause = w.refused.Next()
			// Once per run of refusals: the same refusal is likely for
			// every Event until someone changes the grant or the policy.
			level := zap.DebugLevel
			if !w.refusing {
				w.refusing, level = true, zap.WarnLevel
			}
			w.log.Log(level, "could not write event", zap.String("reason", ev.Reason), zap.String("object", objectName(ev.Regarding)),
				zap.Bool("refused", true), zap.Duration("backoffMax", eventRefusedRetryMax), logging.Err(err))
			return
		}
		transient := transientEventError(err)
		if transient {
			w.pause = w.busy.Next()
		}
		if !transient || attempt >= eventTries || w.ctx.Err() != nil {
			w.log.Warn("could not write event", zap.String("reason", ev.Reason),
				zap.String("object", objectName(ev.Regarding)), zap.Int("attempts", attempt), logging.Err(err))
			return
		}
	}
}

// wait sleeps the back-off the last failure left, if any, or until
// Shutdown gives up on the queue.
func (w *EventWriter) wait() {
	if w.pause <= 0 {
		return
	}
	select {
	case <-w.ctx.Done():
	case <-w.clock.After(w.pause):
	}
	w.pause = 0
}

// refusedEvent is an answer that refuses the write itself (403, 422),
// which the next Event is likely to meet too.
func refusedEvent(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
}

// transientEventError is a failure that trying again may pass: no answer,
// a 5xx, or a 429 (the server shedding load).
func transientEventError(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	code := status.Status().Code
	return code >= 500 || apierrors.IsTooManyRequests(err)
}

// Shutdown stops accepting events and waits until the queued ones are
// written or ctx ends; then the call in flight is abandoned and the rest are
// dropped, and the error says how many.
func (w *EventWriter) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		w.stop()
		return nil
	case <-ctx.Done():
	}
	w.stop()
	<-w.done
	return fmt.Errorf("event writer shut down with %d events unwritten: %w", w.dropped.Load(), ctx.Err())
}

func objectName(ref v1.ObjectReference) string {
	if ref.Namespace == "" {
		return ref.Kind + "/" + ref.Name
	}
	return ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// truncate cuts s to at most n bytes without splitting a UTF-8 character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// webhookFailedNote is the Event note on a pod whose eviction failed because
// the admission webhook webhook could not be called; err carries the
// server's words.
func webhookFailedNote(req Request, webhook string, err error) string {
	why := err.Error()
	if msg, ok := statusMessage(err); ok {
		why = msg
	}
	return fmt.Sprintf("evictd asked to evict this pod (%s) and the API server could not call the admission webhook %q, which selects it and fails closed: %s. "+
		"evictd evicts the next candidate instead and asks about this pod again later.", relieves(req), webhook, why)
}

// podRef is the Event's regarding for a pod.
func podRef(pod *v1.Pod) v1.ObjectReference {
	return v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1",
		Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
	}
}

// nodeRef is the Event's regarding for the node; like the kubelet, it uses
// the node name as UID so the event needs no Node lookup.
func nodeRef(node string) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}
}
