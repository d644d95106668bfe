// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"context"
	"errors"
	"regexp"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// classify maps an API answer to a Result and says whether trying again
// could help.
func classify(err error) (Result, bool) {
	if err == nil {
		return Evicted, false
	}
	switch {
	case apierrors.IsNotFound(err):
		return NotFound, false
	case apierrors.IsTooManyRequests(err):
		if IsPDBRefusal(err) {
			return PDBBlocked, false
		}
		if isAdmissionDenial(err) {
			// A webhook may deny with any code, 429 included.
			return Refused, false
		}
		// API Priority and Fairness also answers 429; that one passes.
		return Failed, true
	case apierrors.IsConflict(err):
		if isUIDMismatch(err) {
			// The UID precondition failed: the pod we meant is gone and
			// another now has its name.
			return NotFound, false
		}
		// The eviction subresource retries its own update conflicts; one
		// that escapes is worth another try.
		return Failed, true
	}
	if isMultiplePDBs(err) {
		// Permanent until someone fixes the PDBs, and for this pod only.
		return Refused, false
	}
	if isWebhookCallFailure(err) {
		// An admission webhook the API server could not call fails the
		// eviction of the pods it selects, and only theirs: the next
		// candidate may go. Not retried within the call: the webhook's
		// backend is down or slow (each try may last the webhook's
		// timeout), and it seldom comes back within seconds.
		return WebhookFailed, false
	}
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return Failed, true
	case errors.Is(err, context.DeadlineExceeded):
		// Our own per-call timeout; the context of the whole operation is
		// checked separately by the caller.
		return Failed, true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		switch {
		case code >= 500:
			return Failed, true
		case code == 403 && isAdmissionNotReady(err):
			// An admission plugin whose informers have not synced yet,
			// right after an API server start: its state, for every pod
			// alike, and gone within seconds.
			return Failed, true
		case code == 401, code == 403 && isAuthorizationDenial(err):
			// evictd's own credentials or permissions: every pod gets the
			// same answer, so it is the episode that backs off.
			return Failed, false
		case code >= 400:
			// An answer about this pod (an admission policy or webhook
			// denying it, 403, 422, 400): the same again for it, but the
			// next candidate may go.
			return Refused, false
		}
		return Failed, false
	}
	// No answer from the server (connection refused or reset, EOF, DNS):
	// the API server may be restarting.
	return Failed, true
}

// IsPDBRefusal tells a PodDisruptionBudget's 429 from any other (API
// Priority and Fairness shedding load answers 429 too): the eviction
// subresource adds a DisruptionBudget cause (and says so in the message,
// which older servers without causes also did).
func IsPDBRefusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause {
				return true
			}
		}
	}
	return strings.Contains(st.Message, "disruption budget")
}

// isUIDMismatch is the 409 of a UID precondition: the delete path of the
// eviction subresource and the pods' DELETE word it differently.
func isUIDMismatch(err error) bool {
	return messageHas(err, "UID in precondition", "UID in the precondition")
}

// isMultiplePDBs is the eviction subresource's 500 for a pod covered by more
// than one PodDisruptionBudget, which it does not support.
func isMultiplePDBs(err error) bool {
	return messageHas(err, "more than one PodDisruptionBudget")
}

// isAdmissionDenial is a validating admission webhook's or
// ValidatingAdmissionPolicy's denial, which the API server words itself
// (k8s.io/apiserver's admission webhook and policy errors) around the
// webhook's or policy's own message.
func isAdmissionDenial(err error) bool {
	return messageHas(err, "admission webhook", "ValidatingAdmissionPolicy")
}

// callingWebhook matches the API server's words when it could not call
// an admission webhook whose failurePolicy is Fail (k8s.io/apiserver's
// webhookutil.ErrCallingWebhook, which the validating and mutating
// dispatchers answer as a 500 InternalError): `failed calling webhook
// "NAME": failed to call webhook: Post "https://...": dial tcp ...:
// connect: connection refused`, or a timeout, or `received invalid webhook
// response: ...`. The submatch is the webhook's name.
var callingWebhook = regexp.MustCompile(`failed calling webhook "([^"]+)"`)

// isWebhookCallFailure is a 5xx of an admission webhook the API server
// could not call (failurePolicy Fail). A webhook that answered and denied
// is isAdmissionDenial's, not this.
func isWebhookCallFailure(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code < 500 {
		return false
	}
	return callingWebhook.MatchString(status.Status().Message)
}

// WebhookName is the name of the admission webhook whose failure err
// reports (an error of a WebhookFailed attempt), or "".
func WebhookName(err error) string {
	msg, ok := statusMessage(err)
	if !ok {
		return ""
	}
	if m := callingWebhook.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return ""
}

// admissionNotReady is the 403 that NamespaceLifecycle (and the webhook and
// ValidatingAdmissionPolicy plugins) answer until their informers have
// synced, right after an API server starts: admission.NewForbidden(a,
// fmt.Errorf("not yet ready to handle request")), worded by
// apierrors.NewForbidden as `pods "NAME" is forbidden: not yet ready to
// handle request`.
const admissionNotReady = "is forbidden: not yet ready to handle request"

// isAdmissionNotReady is that 403: the API server's state, not the pod's.
func isAdmissionNotReady(err error) bool {
	msg, ok := statusMessage(err)
	return ok && strings.HasSuffix(msg, admissionNotReady)
}

// authzDenial matches the authorizer's 403 (k8s.io/apiserver's
// responsewriters.forbiddenMessage): `User "..." cannot create resource
// "pods/eviction" in API group "" in the namespace "..."`.
var authzDenial = regexp.MustCompile(`cannot [a-z]+ resource "pods`)

// isAuthorizationDenial is a 403 of evictd's own permissions (RBAC), not of
// the pod: it answers every pod alike.
func isAuthorizationDenial(err error) bool {
	msg, ok := statusMessage(err)
	return ok && authzDenial.MatchString(msg)
}

// refusalMessage is the server's words for a refusal.
func refusalMessage(err error) string {
	if msg, ok := statusMessage(err); ok {
		return msg
	}
	return err.Error()
}

// statusMessage is the message of the API server's Status in err, if any.
func statusMessage(err error) (string, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return "", false
	}
	return status.Status().Message, true
}

// messageHas reports whether err is an API server Status whose message
// contains one of words.
func messageHas(err error, words ...string) bool {
	msg, ok := statusMessage(err)
	if !ok {
		return false
	}
	for _, w := range words {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// pdbMessage is the server's explanation of a PDB refusal, for logs and
// errors: the causes say which budget and how many pods it needs.
func pdbMessage(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err.Error()
	}
	st := status.Status()
	parts := []string{st.Message}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause && c.Message != "" {
				parts = append(parts, c.Message)
			}
		}
	}
	return strings.Join(parts, " ")
}
