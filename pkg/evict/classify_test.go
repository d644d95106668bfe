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

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
