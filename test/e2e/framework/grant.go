// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WaitForGrant waits until the API server's authorizer lets user get the
// non-resource path. Its RBAC authorizer reads bindings from an informer,
// so a binding just created is honoured a moment later; a test that asks
// at once can read a refusal the binding was meant to lift.
func (c *Cluster) WaitForGrant(t testing.TB, user, path string) {
	t.Helper()
	ctx := context.Background()
	var last *authzv1.SubjectAccessReview
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sar, err := c.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: "get"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview of %s getting %s: %v", user, path, err)
		}
		if sar.Status.Allowed {
			return
		}
		last = sar
	}
	t.Fatalf("%s may still not get %s after 10 s: %s", user, path, last.Status.Reason)
}

// WaitForResourceGrant waits until the API server's authorizer lets user
// do what attrs say (a grant on a resource rather than a path), for the
// same reason as WaitForGrant.
func (c *Cluster) WaitForResourceGrant(t testing.TB, user string, attrs authzv1.ResourceAttributes) {
	t.Helper()
	ctx := context.Background()
	var last *authzv1.SubjectAccessReview
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sar, err := c.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview of %s for %+v: %v", user, attrs, err)
		}
		if sar.Status.Allowed {
			return
		}
		last = sar
	}
	t.Fatalf("%s may still not %s %s/%s in %q after 10 s: %s", user, attrs.Verb, attrs.Resource, attrs.Subresource, attrs.Group, last.Status.Reason)
}
