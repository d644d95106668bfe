// SPDX-License-Identifier: Apache-2.0

// Package fromclientset puts evictd's API calls (the methods of
// kube.Client) on a client-go clientset, so that unit tests can inject API
// errors with k8s.io/client-go/kubernetes/fake and its reactors.
//
// Only tests may import it: the clientset registers every API group at
// start-up, which is what pkg/kube exists to avoid. TestNoClientset in
// cmd/evictd fails if evictd's dependency graph ever holds it.
package fromclientset

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"

	"github.com/evictd/evictd/pkg/kube"
)

// Client makes kube.Client's calls through a clientset.
type Client struct {
	cs kubernetes.Interface
}

// Wrap returns a Client on cs.
func Wrap(cs kubernetes.Interface) *Client { return &Client{cs: cs} }

// IsWatchListSemanticsUnSupported passes on the clientset's answer (true
// for client-go's fake, which sends no initial events on a watch), so that
// informers on this Client list and then watch instead of waiting for a
// streaming list that never comes (client-go's
// watchlist.DoesClientNotSupportWatchListSemantics).
func (c *Client) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.cs)
}

// List lists r in all namespaces.
func (c *Client) List(ctx context.Context, r kube.Resource, opts metav1.ListOptions) (runtime.Object, error) {
	switch r {
	case kube.Pods:
		return c.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	case kube.Nodes:
		return c.cs.CoreV1().Nodes().List(ctx, opts)
	case kube.Namespaces:
		return c.cs.CoreV1().Namespaces().List(ctx, opts)
	case kube.PriorityClasses:
		return c.cs.SchedulingV1().PriorityClasses().List(ctx, opts)
	}
	return nil, fmt.Errorf("fromclientset: unknown resource %v", r)
}

// Watch watches r in all namespaces.
func (c *Client) Watch(ctx context.Context, r kube.Resource, opts metav1.ListOptions) (watch.Interface, error) {
	switch r {
	case kube.Pods:
		return c.cs.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, opts)
	case kube.Nodes:
		return c.cs.CoreV1().Nodes().Watch(ctx, opts)
	case kube.Namespaces:
		return c.cs.CoreV1().Namespaces().Watch(ctx, opts)
	case kube.PriorityClasses:
		return c.cs.SchedulingV1().PriorityClasses().Watch(ctx, opts)
	}
	return nil, fmt.Errorf("fromclientset: unknown resource %v", r)
}

// Evict creates the pods/eviction subresource.
func (c *Client) Evict(ctx context.Context, ev *policyv1.Eviction) error {
	return c.cs.PolicyV1().Evictions(ev.Namespace).Evict(ctx, ev)
}

// DeletePod deletes a pod.
func (c *Client) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.cs.CoreV1().Pods(namespace).Delete(ctx, name, opts)
}

// CreateEvent creates an events.k8s.io/v1 Event.
func (c *Client) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	_, err := c.cs.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// GetPod reads one pod.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return c.cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateEvictionRequest creates an EvictionRequest.
func (c *Client) CreateEvictionRequest(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	return c.cs.LifecycleV1alpha1().EvictionRequests(er.Namespace).Create(ctx, er, metav1.CreateOptions{})
}

// GetEvictionRequest reads one EvictionRequest.
func (c *Client) GetEvictionRequest(ctx context.Context, namespace, name string) (*lifecyclev1alpha1.EvictionRequest, error) {
	return c.cs.LifecycleV1alpha1().EvictionRequests(namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateEvictionRequest replaces an EvictionRequest.
func (c *Client) UpdateEvictionRequest(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (*lifecyclev1alpha1.EvictionRequest, error) {
	return c.cs.LifecycleV1alpha1().EvictionRequests(er.Namespace).Update(ctx, er, metav1.UpdateOptions{})
}

// ListEvictionRequests lists EvictionRequests (all namespaces when
// namespace is empty).
func (c *Client) ListEvictionRequests(ctx context.Context, namespace string, opts metav1.ListOptions) (*lifecyclev1alpha1.EvictionRequestList, error) {
	return c.cs.LifecycleV1alpha1().EvictionRequests(namespace).List(ctx, opts)
}

// DeleteEvictionRequest deletes an EvictionRequest.
func (c *Client) DeleteEvictionRequest(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.cs.LifecycleV1alpha1().EvictionRequests(namespace).Delete(ctx, name, opts)
}
