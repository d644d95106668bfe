// SPDX-License-Identifier: Apache-2.0

// Package kube is evictd's API client: one REST client per API group that
// evictd calls, over a scheme that holds only those groups' types.
//
// client-go's clientset (k8s.io/client-go/kubernetes) is not used on
// purpose: its typed clients import k8s.io/client-go/kubernetes/scheme,
// which registers every built-in API group at start-up. That alone cost
// evictd about 10 MiB of resident memory (docs/performance.md, "The RSS
// floor"). The calls below are the ones the ClusterRole in
// deploy/daemonset.yaml grants, plus DeletePod, which only
// --pdb-policy=best-effort uses and the operator must grant.
//
// With WithRequestMetrics, the one HTTP transport under all the REST
// clients counts every request by verb, resource and answer
// (requestmetrics.go): evictd_api_requests_total.
package kube

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Resource is a kind of object the informers list and watch.
type Resource int

// The resources evictd lists and watches.
const (
	Pods Resource = iota + 1
	Nodes
	Namespaces
	PriorityClasses
)

// String is the resource's name in the API (and in RBAC rules).
func (r Resource) String() string {
	switch r {
	case Pods:
		return "pods"
	case Nodes:
		return "nodes"
	case Namespaces:
		return "namespaces"
	case PriorityClasses:
		return "priorityclasses"
	}
	return fmt.Sprintf("Resource(%d)", int(r))
}

// Group is the resource's API group ("" for the core group).
func (r Resource) Group() string {
	if r == PriorityClasses {
		return schedulingv1.GroupName
	}
	return corev1.GroupName
}

// newList returns an empty list of the resource, for a response to decode into.
func (r Resource) newList() (runtime.Object, error) {
	switch r {
	case Pods:
		return &corev1.PodList{}, nil
	case Nodes:
		return &corev1.NodeList{}, nil
	case Namespaces:
		return &corev1.NamespaceList{}, nil
	case PriorityClasses:
		return &schedulingv1.PriorityClassList{}, nil
	}
	return nil, fmt.Errorf("kube: unknown resource %v", r)
}

// Client talks to the API server. Its methods mirror the clientset calls
// they replace, so that an error is the same *errors.StatusError a
// clientset would return (the callers test it with apierrors.IsXxx).
type Client struct {
	// core serves /api/v1 (pods, nodes, namespaces, and the eviction
	// subresource, which lives under pods); events serves
	// /apis/events.k8s.io/v1, scheduling /apis/scheduling.k8s.io/v1,
	// lifecycle /apis/lifecycle.k8s.io/v1alpha1 (--eviction-request only),
	// coordination /apis/coordination.k8s.io/v1 (the node lease),
	// authn and authz the TokenReviews and SubjectAccessReviews of the
	// secure port (pkg/authdelegate).
	core, events, scheduling, lifecycle, coordination, authn, authz rest.Interface
	// apps serves /apis/apps/v1 for evictd cleanup's DaemonSet deletion
	// only; its types are not in the scheme (no object is decoded).
	apps rest.Interface
}

// NewForConfig builds a Client on cfg. The REST clients share one
// HTTP client, hence one connection pool, as a clientset's do; with
// WithRequestMetrics, its transport counts every request they send.
func NewForConfig(cfg *rest.Config, opts ...Option) (*Client, error) {
	if cfg == nil {
		return nil, fmt.Errorf("kube: no REST config")
	}
	o := clientOptions{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.metrics != nil {
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return &countingTransport{next: rt, metrics: o.metrics, clock: o.clock}
		})
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: HTTP client: %w", err)
	}
	c := &Client{}
	for _, g := range []struct {
		gv      schema.GroupVersion
		apiPath string
		out     *rest.Interface
	}{
		{corev1.SchemeGroupVersion, "/api", &c.core},
		{eventsv1.SchemeGroupVersion, "/apis", &c.events},
		{schedulingv1.SchemeGroupVersion, "/apis", &c.scheduling},
		{lifecyclev1alpha1.SchemeGroupVersion, "/apis", &c.lifecycle},
		{coordinationv1.SchemeGroupVersion, "/apis", &c.coordination},
		{authnv1.SchemeGroupVersion, "/apis", &c.authn},
		{authzv1.SchemeGroupVersion, "/apis", &c.authz},
		{schema.GroupVersion{Group: "apps", Version: "v1"}, "/apis", &c.apps},
	} {
		gcfg := rest.CopyConfig(cfg)
		gv := g.gv
		gcfg.GroupVersion = &gv
		gcfg.APIPath = g.apiPath
		gcfg.NegotiatedSerializer = negotiated
		gcfg.ContentType = runtime.ContentTypeJSON
		gcfg.AcceptContentTypes = runtime.ContentTypeJSON
		if gcfg.UserAgent == "" {
			gcfg.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		rc, err := rest.RESTClientForConfigAndClient(gcfg, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kube: %s client: %w", gv, err)
		}
		*g.out = rc
	}
	return c, nil
}

// List lists r (all namespaces) with opts.
func (c *Client) List(ctx context.Context, r Resource, opts metav1.ListOptions) (runtime.Object, error) {
	out, err := r.newList()
	if err != nil {
		return nil, err
	}
	req := c.clientFor(r).Get().Resource(r.String()).VersionedParams(&opts, parameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	if err := req.Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Watch watches r (all namespaces) from opts.ResourceVersion.
func (c *Client) Watch(ctx context.Context, r Resource, opts metav1.ListOptions) (watch.Interface, error) {
	if _, err := r.newList(); err != nil {
		return nil, err
	}
	opts.Watch = true
	req := c.clientFor(r).Get().Resource(r.String()).VersionedParams(&opts, parameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	return req.Watch(ctx)
}

func (c *Client) clientFor(r Resource) rest.Interface {
	if r.Group() == schedulingv1.GroupName {
		return c.scheduling
	}
	return c.core
}

// Evict creates the pods/eviction subresource of the pod ev names (the
// policy/v1 Eviction API; its body is a policy/v1 object under /api/v1).
func (c *Client) Evict(ctx context.Context, ev *policyv1.Eviction) error {
	return c.core.Post().Namespace(ev.Namespace).Resource("pods").Name(ev.Name).SubResource("eviction").
		Body(ev).Do(ctx).Error()
}

// TokenReview asks the API server whom token authenticates.
func (c *Client) TokenReview(ctx context.Context, token string) (authnv1.TokenReviewStatus, error) {
	out := &authnv1.TokenReview{}
	in := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	if err := c.authn.Post().Resource("tokenreviews").Body(in).Do(ctx).Into(out); err != nil {
		return authnv1.TokenReviewStatus{}, err
	}
	return out.Status, nil
}

// SubjectAccessReview asks the API server whether spec's caller may do
// what spec says.
func (c *Client) SubjectAccessReview(ctx context.Context, spec authzv1.SubjectAccessReviewSpec) (authzv1.SubjectAccessReviewStatus, error) {
	out := &authzv1.SubjectAccessReview{}
	if err := c.authz.Post().Resource("subjectaccessreviews").Body(&authzv1.SubjectAccessReview{Spec: spec}).Do(ctx).Into(out); err != nil {
		return authzv1.SubjectAccessReviewStatus{}, err
	}
	return out.Status, nil
}

// DeletePod deletes a pod directly (--pdb-policy=best-effort's last resort).
func (c *Client) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.core.Delete().Namespace(namespace).Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

// CreateEvent creates an events.k8s.io/v1 Event.
func (c *Client) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	return c.events.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Error()
}

// GetPod reads one pod (--eviction-request follows its victim with it).
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := c.core.Get().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CreateEvictionRequest creates a lifecycle.k8s.io/v1alpha1 EvictionRequest.
// A 404 means the API server does not serve the resource (the
// EvictionRequestAPI feature gate or its runtime config is off).
func (c *Client) CreateEvictionRequest(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	out := &lifecyclev1alpha1.EvictionRequest{}
	if err := c.lifecycle.Post().Namespace(er.Namespace).Resource("evictionrequests").Body(er).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetEvictionRequest reads one EvictionRequest.
func (c *Client) GetEvictionRequest(ctx context.Context, namespace, name string) (*lifecyclev1alpha1.EvictionRequest, error) {
	out := &lifecyclev1alpha1.EvictionRequest{}
	if err := c.lifecycle.Get().Namespace(namespace).Resource("evictionrequests").Name(name).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateEvictionRequest replaces an EvictionRequest's spec (its intent).
func (c *Client) UpdateEvictionRequest(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	out := &lifecyclev1alpha1.EvictionRequest{}
	if err := c.lifecycle.Put().Namespace(er.Namespace).Resource("evictionrequests").Name(er.Name).Body(er).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListEvictionRequests lists EvictionRequests in namespace (all namespaces
// when empty): at start, --eviction-request finds the requests an earlier
// evictd left open.
func (c *Client) ListEvictionRequests(ctx context.Context, namespace string, opts metav1.ListOptions) (*lifecyclev1alpha1.EvictionRequestList, error) {
	out := &lifecyclev1alpha1.EvictionRequestList{}
	req := c.lifecycle.Get().Namespace(namespace).Resource("evictionrequests").VersionedParams(&opts, parameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	if err := req.Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteEvictionRequest deletes an EvictionRequest (a deletion also counts
// as its requester's withdrawal).
func (c *Client) DeleteEvictionRequest(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.lifecycle.Delete().Namespace(namespace).Resource("evictionrequests").Name(name).Body(&opts).Do(ctx).Error()
}

// GetLease reads one coordination.k8s.io/v1 Lease (the node lease).
func (c *Client) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	if err := c.coordination.Get().Namespace(namespace).Resource("leases").Name(name).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateLease creates a Lease; a 409 AlreadyExists means another agent
// created it first.
func (c *Client) CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	if err := c.coordination.Post().Namespace(l.Namespace).Resource("leases").Body(l).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateLease replaces a Lease; its resourceVersion makes the write
// conditional (a 409 Conflict when another agent wrote in between).
func (c *Client) UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	if err := c.coordination.Put().Namespace(l.Namespace).Resource("leases").Name(l.Name).Body(l).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteLease deletes a Lease (opts.Preconditions keep it to the version
// the caller holds).
func (c *Client) DeleteLease(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.coordination.Delete().Namespace(namespace).Resource("leases").Name(name).Body(&opts).Do(ctx).Error()
}

// ListLeases lists the Leases of namespace (evictd cleanup finds the
// node leases evictd left).
func (c *Client) ListLeases(ctx context.Context, namespace string, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	if err := c.coordination.Get().Namespace(namespace).Resource("leases").VersionedParams(&opts, parameterCodec).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteDaemonSet deletes a DaemonSet (evictd cleanup, with foreground
// propagation: the DaemonSet stays until its pods are gone).
func (c *Client) DeleteDaemonSet(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.apps.Delete().Namespace(namespace).Resource("daemonsets").Name(name).Body(&opts).Do(ctx).Error()
}

// DaemonSetExists reports whether the DaemonSet is still there (nil error
// with false once it is gone). The object is not decoded: apps types are
// not in the scheme.
func (c *Client) DaemonSetExists(ctx context.Context, namespace, name string) (bool, error) {
	err := c.apps.Get().Namespace(namespace).Resource("daemonsets").Name(name).Do(ctx).Error()
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// WatchLeases watches the Leases of namespace that opts selects (the node
// lease, by a metadata.name field selector).
func (c *Client) WatchLeases(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	req := c.coordination.Get().Namespace(namespace).Resource("leases").VersionedParams(&opts, parameterCodec)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	return req.Watch(ctx)
}

// PatchNode patches a Node (the node brake's taints: a merge patch whose
// resourceVersion makes it conditional, as spec.taints is replaced whole).
func (c *Client) PatchNode(ctx context.Context, name string, pt types.PatchType, data []byte) (*corev1.Node, error) {
	out := &corev1.Node{}
	if err := c.core.Patch(pt).Resource("nodes").Name(name).Body(data).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// PatchNodeStatus patches a Node's status subresource (the node brake's
// conditions: a strategic merge patch, merged by condition type).
func (c *Client) PatchNodeStatus(ctx context.Context, name string, pt types.PatchType, data []byte) (*corev1.Node, error) {
	out := &corev1.Node{}
	if err := c.core.Patch(pt).Resource("nodes").Name(name).SubResource("status").Body(data).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadNode reads one Node fresh from the API server. It lists with a field
// selector, not a get: evictd's ClusterRole grants list and watch of nodes
// and no get (the informer answers every other read), and this read is for
// when the informer has stopped (the exit lift of pkg/nodebrake).
func (c *Client) ReadNode(ctx context.Context, name string) (*corev1.Node, error) {
	out := &corev1.NodeList{}
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	if err := c.core.Get().Resource("nodes").VersionedParams(&opts, parameterCodec).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	if len(out.Items) == 0 {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	return &out.Items[0], nil
}

// DefaultSyncTimeout is how long a caller waits by default for its
// informers' first list (podwatch's WaitForSync, --informer-sync-timeout):
// long enough for a loaded API server, short enough that a missing grant
// or an unreachable server shows as an error, not as an agent unready for
// ever.
const DefaultSyncTimeout = 2 * time.Minute
