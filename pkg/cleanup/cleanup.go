// SPDX-License-Identifier: Apache-2.0

// Package cleanup takes back everything evictd wrote to a cluster, for an
// uninstall: the node brake on every Node (evictd's taints and
// conditions), the agents' node Leases, and the EvictionRequests evictd
// made. Optionally it first deletes evictd's DaemonSet and waits for its
// pods to be gone, so that running agents lift their own brakes and none
// is left to put one back afterwards. The Helm chart's pre-delete hook
// runs it (evictd cleanup), and docs/install.md's kustomize uninstall.
//
// Every write is conditional on the object as read, and the last step
// reads everything again: Run reports what is left, never that it hopes
// nothing is.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/backoff"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/nodebrake"
	"github.com/evictd/evictd/pkg/nodelease"
)

// API is the part of the API client cleanup uses (*kube.Client).
type API interface {
	List(ctx context.Context, r kube.Resource, opts metav1.ListOptions) (runtime.Object, error)
	PatchNode(ctx context.Context, name string, pt types.PatchType, data []byte) (*v1.Node, error)
	PatchNodeStatus(ctx context.Context, name string, pt types.PatchType, data []byte) (*v1.Node, error)
	ListLeases(ctx context.Context, namespace string, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	DeleteLease(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	ListEvictionRequests(ctx context.Context, namespace string, opts metav1.ListOptions) (*lifecyclev1alpha1.EvictionRequestList, error)
	DeleteEvictionRequest(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	DeleteDaemonSet(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	DaemonSetExists(ctx context.Context, namespace, name string) (bool, error)
}

// Options configure Run.
type Options struct {
	API API
	// LeaseNamespace holds the agents' node leases (the agents'
	// --node-lease-namespace).
	LeaseNamespace string
	// Requester is the spec.requester of evictd's EvictionRequests.
	Requester string
	// DaemonSet, "namespace/name", is deleted first and waited for; "" for
	// none.
	DaemonSet string
	// Attempts bounds the tries of the Nodes' list and of each Node's
	// writes: a write that conflicts with another writer's (the kubelet's
	// status, a scheduler's taint) is read again and retried, and so is
	// one the API server could not serve (5xx, 429, no answer), each time
	// after a longer back-off; a refused one (403, 422) is not.
	Attempts int
	// Poll is how often the DaemonSet's deletion is checked while the API
	// server answers; a failed check backs off from it.
	Poll  time.Duration
	Clock clock.Clock
	Log   *zap.Logger
}

// Result is what Run did and what is left.
type Result struct {
	TaintsRemoved     int
	ConditionsRemoved int
	LeasesDeleted     int
	// EvictionRequestsDeleted counts the EvictionRequests deleted;
	// EvictionRequestsServed is false when the API server does not serve
	// them (nothing to delete).
	EvictionRequestsDeleted int
	EvictionRequestsServed  bool
	// Left names, one entry each, what is still on the cluster after Run.
	Left []string
}

// Defaults.
const (
	DefaultAttempts = 5
	DefaultPoll     = time.Second
)

// The back-off between tries (package backoff: doubling, with jitter):
// from about retryInitial to retryMax, so that a cleanup meeting an API
// server in trouble asks again every few seconds at first and twice a
// minute at the most; DefaultAttempts' tries span 15 s at the most.
const (
	retryInitial = time.Second
	retryMax     = 30 * time.Second
)

// ParseDaemonSet checks a "namespace/name" DaemonSet reference.
func ParseDaemonSet(s string) (namespace, name string, err error) {
	ns, n, ok := strings.Cut(s, "/")
	if !ok || ns == "" || n == "" || strings.Contains(n, "/") {
		return "", "", fmt.Errorf("DaemonSet %q: want namespace/name", s)
	}
	return ns, n, nil
}

// Run takes back what evictd wrote; ctx bounds it (the wait for the
// DaemonSet's pods included). The error is nil only when nothing is left.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if o.API == nil || o.LeaseNamespace == "" || o.Requester == "" {
		return res, errors.New("cleanup: API, LeaseNamespace and Requester must be set")
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.DaemonSet != "" {
		if err := deleteDaemonSet(ctx, o); err != nil {
			return res, err
		}
	}
	var errs []error
	if err := nodes(ctx, o, &res); err != nil {
		errs = append(errs, err)
	}
	if err := leases(ctx, o, &res); err != nil {
		errs = append(errs, err)
	}
	if err := evictionRequests(ctx, o, &res); err != nil {
		errs = append(errs, err)
	}
	left, err := Left(ctx, o)
	res.Left = left
	if err != nil {
		errs = append(errs, err)
	}
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("left on the cluster: %s", strings.Join(left, ", ")))
	}
	return res, errors.Join(errs...)
}

// deleteDaemonSet deletes the DaemonSet with foreground propagation and
// waits until it is gone: the garbage collector removes it only after its
// pods are deleted, so by then every agent has exited (and lifted its
// brake, when it could).
func deleteDaemonSet(ctx context.Context, o Options) error {
	ns, name, err := ParseDaemonSet(o.DaemonSet)
	if err != nil {
		return err
	}
	fg := metav1.DeletePropagationForeground
	err = try(ctx, o, func() error {
		return o.API.DeleteDaemonSet(ctx, ns, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	})
	switch {
	case apierrors.IsNotFound(err):
		o.Log.Info("the DaemonSet is gone already", zap.String("daemonSet", o.DaemonSet))
		return nil
	case err != nil:
		return fmt.Errorf("delete DaemonSet %s: %w", o.DaemonSet, err)
	}
	o.Log.Info("deleting the DaemonSet; waiting for its pods to be gone", zap.String("daemonSet", o.DaemonSet))
	failing := backoff.Backoff{Initial: o.Poll, Max: retryMax}
	for {
		exists, err := o.API.DaemonSetExists(ctx, ns, name)
		wait := o.Poll
		switch {
		case err == nil && !exists:
			o.Log.Info("the DaemonSet and its pods are gone", zap.String("daemonSet", o.DaemonSet))
			return nil
		case err == nil:
			failing.Reset()
		case ctx.Err() == nil:
			wait = failing.Next()
			o.Log.Warn("cannot read the DaemonSet; trying again", zap.String("daemonSet", o.DaemonSet),
				zap.Duration("retryIn", wait.Round(time.Millisecond)), logging.Err(err))
		}
		if !sleep(ctx, o.Clock, wait) {
			return fmt.Errorf("DaemonSet %s still has pods: %w", o.DaemonSet, ctx.Err())
		}
	}
}

// try makes call until it succeeds, fails for good (not retryable),
// Attempts tries, or ctx ends, backing off between the tries, and returns
// its last error.
func try(ctx context.Context, o Options, call func() error) error {
	wait := backoff.Backoff{Initial: retryInitial, Max: retryMax}
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || !retryable(err) || attempt >= o.Attempts || !sleep(ctx, o.Clock, wait.Next()) {
			return err
		}
	}
}

// sleep waits d on clk, and reports false if ctx ends first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-clk.After(d):
		return true
	}
}

// retryable reports whether err may pass if the same request is made
// again: a conflict (once the object is read again), the API server away
// or shedding load (5xx, 429), no answer. An answer that refuses the
// request (403, 422 and the like) will be the same again.
func retryable(err error) bool {
	if apierrors.IsConflict(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code >= 500 || status.Status().Code == 0
	}
	return true
}

func listNodes(ctx context.Context, api API, opts metav1.ListOptions) ([]v1.Node, error) {
	obj, err := api.List(ctx, kube.Nodes, opts)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return obj.(*v1.NodeList).Items, nil
}

// nodes lifts the brake on every Node with nodebrake's own final patches
// (a clean exit's): evictd's taints dropped, its conditions deleted. A
// Node whose writes can pass when tried again (a conflict: someone wrote
// it in between; the API server in trouble) is read again alone and
// tried again after the back-off, up to Attempts times; the Nodes are
// listed once.
func nodes(ctx context.Context, o Options, res *Result) error {
	var list []v1.Node
	if err := try(ctx, o, func() (err error) {
		list, err = listNodes(ctx, o.API, metav1.ListOptions{})
		return err
	}); err != nil {
		return err
	}
	wait := backoff.Backoff{Initial: retryInitial, Max: retryMax}
	// final holds the errors no try can change; errs, below, those of the
	// last try of the Nodes tried again.
	var final []error
	pending := list
	for attempt := 1; ; attempt++ {
		var again []v1.Node
		var errs []error
		for i := range pending {
			if err := node(ctx, o, &pending[i], res); err != nil {
				if retryable(err) {
					again = append(again, pending[i])
					errs = append(errs, err)
				} else {
					final = append(final, err)
				}
			}
		}
		if len(again) == 0 || attempt >= o.Attempts || !sleep(ctx, o.Clock, wait.Next()) {
			return errors.Join(append(final, errs...)...)
		}
		pending = pending[:0]
		for _, n := range again {
			fresh, err := readNode(ctx, o.API, n.Name)
			switch {
			case err != nil:
				// Tried again as read before: the conditions' patch needs
				// no version, and the taints' meets a conflict again.
				pending = append(pending, n)
			case fresh != nil:
				pending = append(pending, *fresh)
			}
		}
	}
}

// readNode reads one Node with a list selected on its name (evictd
// cleanup may list Nodes, not get them); nil when it is gone.
func readNode(ctx context.Context, api API, name string) (*v1.Node, error) {
	items, err := listNodes(ctx, api, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return &items[0], nil
}

func node(ctx context.Context, o Options, n *v1.Node, res *Result) error {
	var errs []error
	// Taints first: their patch is conditional on the resourceVersion
	// read, which the condition write would change.
	if taints, equal := nodebrake.Taints(n, nil, "", true); !equal {
		var removed []string
		for _, t := range n.Spec.Taints {
			if strings.HasPrefix(t.Key, nodebrake.TaintPrefix) {
				removed = append(removed, t.Key+":"+string(t.Effect))
			}
		}
		if _, err := o.API.PatchNode(ctx, n.Name, types.MergePatchType, nodebrake.TaintPatch(n, taints)); err != nil {
			errs = append(errs, fmt.Errorf("node %s: remove taints %s: %w", n.Name, strings.Join(removed, ", "), err))
		} else {
			res.TaintsRemoved += len(removed)
			o.Log.Info("removed evictd's taints", zap.String("node", n.Name), zap.Strings("taints", removed))
		}
	}
	if p := nodebrake.ConditionPatch(n, nil, o.Clock.Now(), nodebrake.DefaultHeartbeat, true); p != nil {
		var removed []string
		for _, c := range n.Status.Conditions {
			if isBrakeCondition(c.Type) {
				removed = append(removed, string(c.Type)+"="+string(c.Status))
			}
		}
		if _, err := o.API.PatchNodeStatus(ctx, n.Name, types.StrategicMergePatchType, p); err != nil {
			errs = append(errs, fmt.Errorf("node %s: remove conditions %s: %w", n.Name, strings.Join(removed, ", "), err))
		} else {
			res.ConditionsRemoved += len(removed)
			o.Log.Info("removed evictd's conditions", zap.String("node", n.Name), zap.Strings("conditions", removed))
		}
	}
	return errors.Join(errs...)
}

func isBrakeCondition(t v1.NodeConditionType) bool {
	return slices.ContainsFunc(nodebrake.Resources(), func(r nodebrake.Resource) bool { return nodebrake.ConditionType(r) == t })
}

// leases deletes the agents' node leases, each conditional on the version
// read; the kubelet's (IsEvictds) are never touched.
func leases(ctx context.Context, o Options, res *Result) error {
	list, err := o.API.ListLeases(ctx, o.LeaseNamespace, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list leases in %s: %w", o.LeaseNamespace, err)
	}
	var errs []error
	for i := range list.Items {
		l := &list.Items[i]
		if !nodelease.IsEvictds(l) {
			continue
		}
		uid, rv := l.UID, l.ResourceVersion
		err := o.API.DeleteLease(ctx, l.Namespace, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case err == nil:
			res.LeasesDeleted++
			o.Log.Info("deleted evictd's node lease", zap.String("lease", l.Namespace+"/"+l.Name), zap.String("holder", *l.Spec.HolderIdentity))
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("delete lease %s/%s: %w", l.Namespace, l.Name, err))
		}
	}
	return errors.Join(errs...)
}

// evictionRequests deletes evictd's EvictionRequests in every namespace (a
// deletion is the requester's withdrawal); a 404 on the list means the API
// server does not serve them.
func evictionRequests(ctx context.Context, o Options, res *Result) error {
	found, served, err := listEvictionRequests(ctx, o)
	res.EvictionRequestsServed = served
	if err != nil || !served {
		return err
	}
	var errs []error
	for _, er := range found {
		uid, rv := er.UID, er.ResourceVersion
		err := o.API.DeleteEvictionRequest(ctx, er.Namespace, er.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case err == nil:
			res.EvictionRequestsDeleted++
			o.Log.Info("deleted evictd's EvictionRequest", zap.String("evictionRequest", er.Namespace+"/"+er.Name))
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("delete EvictionRequest %s/%s: %w", er.Namespace, er.Name, err))
		}
	}
	return errors.Join(errs...)
}

func listEvictionRequests(ctx context.Context, o Options) (found []lifecyclev1alpha1.EvictionRequest, served bool, err error) {
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := o.API.ListEvictionRequests(ctx, metav1.NamespaceAll, opts)
		switch {
		case apierrors.IsNotFound(err):
			return nil, false, nil
		case err != nil:
			return nil, true, fmt.Errorf("list EvictionRequests: %w", err)
		}
		for _, er := range list.Items {
			if er.Spec.Requester == o.Requester {
				found = append(found, er)
			}
		}
		if list.Continue == "" {
			return found, true, nil
		}
		opts.Continue = list.Continue
	}
}

// Left reads the cluster again and names what evictd wrote that is still
// there: a taint of evictd's prefix, an evictd condition at True, an
// agent's node lease, an EvictionRequest of evictd's requester.
func Left(ctx context.Context, o Options) ([]string, error) {
	var left []string
	var errs []error
	list, err := listNodes(ctx, o.API, metav1.ListOptions{})
	errs = append(errs, err)
	for _, n := range list {
		for _, t := range n.Spec.Taints {
			if strings.HasPrefix(t.Key, nodebrake.TaintPrefix) {
				left = append(left, fmt.Sprintf("taint %s:%s on node %s", t.Key, t.Effect, n.Name))
			}
		}
		for _, c := range n.Status.Conditions {
			if isBrakeCondition(c.Type) && c.Status == v1.ConditionTrue {
				left = append(left, fmt.Sprintf("condition %s=True on node %s", c.Type, n.Name))
			}
		}
	}
	leases, err := o.API.ListLeases(ctx, o.LeaseNamespace, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, fmt.Errorf("list leases in %s: %w", o.LeaseNamespace, err))
	} else {
		for i := range leases.Items {
			if nodelease.IsEvictds(&leases.Items[i]) {
				left = append(left, "lease "+leases.Items[i].Namespace+"/"+leases.Items[i].Name)
			}
		}
	}
	ers, _, err := listEvictionRequests(ctx, o)
	errs = append(errs, err)
	for _, er := range ers {
		left = append(left, "EvictionRequest "+er.Namespace+"/"+er.Name)
	}
	return left, errors.Join(errs...)
}
