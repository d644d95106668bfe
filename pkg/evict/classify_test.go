// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/evictd/evictd/pkg/thresholds"
)

var podsGR = schema.GroupResource{Resource: "pods"}

// pdbRefusal builds the 429 the eviction subresource returns for a PDB,
// with its DisruptionBudget cause.
func pdbRefusal(cause string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

// statusErr builds a StatusError with a bare code and message, as a server
// returns a Status it did not give a reason.
func statusErr(code int32, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Message: msg}}
}

// webhookCallFailure is the API server's answer when it could not call an
// admission webhook whose failurePolicy is Fail: a 500 whose message is
// webhookutil.ErrCallingWebhook's, "failed calling webhook NAME: REASON".
func webhookCallFailure(webhook, reason string) error {
	return apierrors.NewInternalError(fmt.Errorf("failed calling webhook %q: %s", webhook, reason))
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      Result
		wantRetry bool
	}{
		{"success", nil, Evicted, false},
		{"404 pod gone", apierrors.NewNotFound(podsGR, "web-1"), NotFound, false},
		{"429 PDB", pdbRefusal("The disruption budget web needs 2 healthy pods and has 2 currently"), PDBBlocked, false},
		{"429 PDB still processing", pdbRefusal("The disruption budget web is still being processed by the server."), PDBBlocked, false},
		{"429 PDB message only (old server)", apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0), PDBBlocked, false},
		{"429 API priority and fairness", apierrors.NewTooManyRequests("too many requests, please try again later", 1), Failed, true},
		{"409 UID mismatch (eviction)", apierrors.NewConflict(podsGR, "web-1",
			errors.New("the UID in the precondition (a) does not match the UID in record (b). The object might have been deleted and then recreated")), NotFound, false},
		{"409 UID mismatch (delete)", apierrors.NewConflict(podsGR, "web-1",
			errors.New("Precondition failed: UID in precondition: a, UID in object meta: b")), NotFound, false},
		{"409 other conflict", apierrors.NewConflict(podsGR, "web-1", errors.New("the object has been modified")), Failed, true},
		{"500 multiple PDBs", statusErr(500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."), Refused, false},
		{"500 internal", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), Failed, true},
		{"500 bare", statusErr(500, "boom"), Failed, true},
		{"502 bare", statusErr(502, "bad gateway"), Failed, true},
		{"503", apierrors.NewServiceUnavailable("apiserver is shutting down"), Failed, true},
		{"504 server timeout", apierrors.NewServerTimeout(podsGR, "create", 1), Failed, true},
		{"timeout", apierrors.NewTimeoutError("request did not complete", 1), Failed, true},
		{"403 RBAC (evictd's own permission)", statusErr(403,
			`pods "web-1" is forbidden: User "system:serviceaccount:evictd-system:evictd" cannot create resource "pods/eviction" in API group "" in the namespace "shop"`), Failed, false},
		{"403 ValidatingAdmissionPolicy", apierrors.NewForbidden(podsGR, "web-1",
			errors.New("ValidatingAdmissionPolicy 'no-evict' with binding 'no-evict' denied request: this pod is never evicted")), Refused, false},
		{"403 webhook", statusErr(403, `admission webhook "guard.example.com" denied the request: protected`), Refused, false},
		{"429 webhook (no disruption budget cause)", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 429,
			Reason: metav1.StatusReasonTooManyRequests, Message: `admission webhook "drain.example.com" denied the request: draining elsewhere`}}, Refused, false},
		{"422 invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Eviction"}, "web-1", field.ErrorList{field.Invalid(field.NewPath("x"), 1, "bad")}), Refused, false},
		{"400 bad request", apierrors.NewBadRequest("no"), Refused, false},
		// A webhook the API server could not call (failurePolicy: Fail): the
		// dispatchers' apierrors.NewInternalError(&ErrCallingWebhook{...}),
		// k8s.io/apiserver/pkg/admission/plugin/webhook/{validating,mutating}.
		// About the pods the webhook selects, not the API server.
		{"500 webhook unreachable", webhookCallFailure("guard.example.com",
			`failed to call webhook: Post "https://127.0.0.1:1/validate?timeout=10s": dial tcp 127.0.0.1:1: connect: connection refused`), WebhookFailed, false},
		{"500 webhook timed out", webhookCallFailure("guard.example.com",
			`failed to call webhook: Post "https://guard.webhooks.svc:443/validate?timeout=10s": context deadline exceeded`), WebhookFailed, false},
		{"500 webhook invalid response", webhookCallFailure("guard.example.com",
			"received invalid webhook response: expected response.uid=\"a\", got \"b\""), WebhookFailed, false},
		// NamespaceLifecycle (and the webhook and policy plugins) before
		// their informers sync, right after an API server starts:
		// admission.NewForbidden(a, fmt.Errorf("not yet ready to handle
		// request")), k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle.
		// The API server's state, for every pod alike.
		{"403 admission not yet ready", apierrors.NewForbidden(podsGR, "web-1", errors.New("not yet ready to handle request")), Failed, true},
		{"401", apierrors.NewUnauthorized("token expired"), Failed, false},
		{"per-call deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), Failed, true},
		{"connection refused", &url.Error{Op: "Post", URL: "https://apiserver/x", Err: syscall.ECONNREFUSED}, Failed, true},
		{"EOF", &url.Error{Op: "Post", URL: "https://apiserver/x", Err: io.EOF}, Failed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, retry := classify(tt.err)
			if got != tt.want || retry != tt.wantRetry {
				t.Errorf("classify(%v) = %s, retry %v; want %s, retry %v", tt.err, got, retry, tt.want, tt.wantRetry)
			}
		})
	}
}

func TestPDBMessageNamesTheBudget(t *testing.T) {
	msg := pdbMessage(pdbRefusal("The disruption budget web-pdb needs 2 healthy pods and has 2 currently"))
	for _, want := range []string{"disruption budget.", "web-pdb needs 2 healthy pods"} {
		if !strings.Contains(msg, want) {
			t.Errorf("pdbMessage = %q, lacks %q", msg, want)
		}
	}
}

// A webhook the API server cannot call fails this pod's eviction: one call
// (no retry: the next candidate is a better use of the time), a
// WebhookFailed result wrapping ErrWebhookFailed and naming the webhook,
// counted as webhook_failed, and once an episode a warning and an
// EvictionWebhookFailed Event on the pod that name the webhook.
func TestEvictWebhookFailure(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.metrics.InitSignals(thresholds.MemoryAvailable) // every result's series, at 0
	down := webhookCallFailure("guard.example.com",
		`failed to call webhook: Post "https://127.0.0.1:1/validate?timeout=10s": dial tcp 127.0.0.1:1: connect: connection refused`)
	h.script(down, down, down, down, down, down)
	pod := testPod("web-1", nil)
	for i := range 2 {
		out, err := h.ev.Evict(context.Background(), memReq(pod, true))
		if out.Result != WebhookFailed || out.Attempts != 1 {
			t.Fatalf("call %d: outcome %+v, want %s after 1 attempt", i, out, WebhookFailed)
		}
		var pe *PodError
		if !errors.Is(err, ErrWebhookFailed) || !errors.As(err, &pe) || pe.Pod != "shop/web-1" || pe.Result != WebhookFailed {
			t.Fatalf("call %d: error %v, want a *PodError for shop/web-1 wrapping ErrWebhookFailed", i, err)
		}
		if got := WebhookName(err); got != "guard.example.com" {
			t.Errorf("WebhookName(%v) = %q, want guard.example.com", err, got)
		}
	}
	if n, _ := h.calls(); n != 2 {
		t.Errorf("%d eviction calls for 2 attempts, want 2 (no retry within a call)", n)
	}
	if got := h.counter(thresholds.MemoryAvailable, WebhookFailed); got != 2 {
		t.Errorf("evictd_evictions_total{result=webhook_failed} = %v, want 2", got)
	}
	if got := h.counter(thresholds.MemoryAvailable, Failed); got != 0 {
		t.Errorf("evictd_evictions_total{result=error} = %v, want 0", got)
	}
	warn := h.logs.FilterLevelExact(zapcore.WarnLevel).FilterField(zap.String("webhook", "guard.example.com"))
	debug := h.logs.FilterLevelExact(zapcore.DebugLevel).FilterField(zap.String("webhook", "guard.example.com"))
	if warn.Len() != 1 || debug.Len() != 1 {
		t.Errorf("logged %d warnings and %d debug lines naming the webhook, want 1 and 1 (once an episode at Warn)", warn.Len(), debug.Len())
	}
	evs := h.flushEvents()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(evs), evs)
	}
	if e := evs[0]; e.Reason != ReasonEvictionWebhookFailed || e.Type != v1.EventTypeWarning || e.Regarding.UID != pod.UID ||
		!strings.Contains(e.Note, `could not call the admission webhook "guard.example.com"`) ||
		!strings.Contains(e.Note, "connection refused") || !strings.Contains(e.Note, "evicts the next candidate") {
		t.Errorf("unexpected event %+v", e)
	}
}

// The 403 of an admission plugin not ready yet is retried within the call,
// as any transient failure, and the eviction then goes.
func TestEvictAdmissionNotYetReadyIsRetried(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.metrics.InitSignals(thresholds.MemoryAvailable)
	notReady := apierrors.NewForbidden(podsGR, "web-1", errors.New("not yet ready to handle request"))
	h.script(notReady, notReady, nil)
	out, err := h.ev.Evict(context.Background(), memReq(testPod("web-1", nil), true))
	if out.Result != Evicted || out.Attempts != 3 || err != nil {
		t.Fatalf("outcome %+v, err %v; want evicted at the 3rd attempt", out, err)
	}
	if got := h.counter(thresholds.MemoryAvailable, Refused); got != 0 {
		t.Errorf("evictd_evictions_total{result=refused} = %v, want 0", got)
	}
}
