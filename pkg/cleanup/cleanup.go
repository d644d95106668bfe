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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

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
	// Attempts bounds the rounds over the Nodes: a write that conflicts
	// with another writer's (the kubelet's status, a scheduler's taint) is
	// read again and retried.
	Attempts int
	// Poll is how often the DaemonSet's deletion is checked.
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
	err = o.API.DeleteDaemonSet(ctx, ns, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	switch {
	case apierrors.IsNotFound(err):
		o.Log.Info("the DaemonSet is gone already", zap.String("daemonSet", o.DaemonSet))
		return nil
	case err != nil:
		return fmt.Errorf("delete DaemonSet %s: %w", o.DaemonSet, err)
	}
	o.Log.Info("deleting the DaemonSet; waiting for its pods to be gone", zap.String("daemonSet", o.DaemonSet))
	for {
		exists, err := o.API.DaemonSetExists(ctx, ns, name)
		switch {
		case err == nil && !exists:
			o.Log.Info("the DaemonSet and its pods are gone", zap.String("daemonSet", o.DaemonSet))
			return nil
		case err != nil && ctx.Err() == nil:
			o.Log.Warn("cannot read the DaemonSet; trying again", zap.String("daemonSet", o.DaemonSet), logging.Err(err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("DaemonSet %s still has pods: %w", o.DaemonSet, ctx.Err())
		case <-o.Clock.After(o.Poll):
		}
	}
}

func listNodes(ctx context.Context, api API) ([]v1.Node, error) {
	obj, err := api.List(ctx, kube.Nodes, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return obj.(*v1.NodeList).Items, nil
}

// nodes lifts the brake on every Node with nodebrake's own final patches
// (a clean exit's): evictd's taints dropped, its conditions deleted. A
// conflict (someone wrote the Node in between) is read again.
func nodes(ctx context.Context, o Options, res *Result) error {
	var err error
	for attempt := 0; attempt < o.Attempts; attempt++ {
		var list []v1.Node
		if list, err = listNodes(ctx, o.API); err != nil {
			continue
		}
		var errs []error
		for i := range list {
			if e := node(ctx, o, &list[i], res); e != nil {
				errs = append(errs, e)
			}
		}
		if err = errors.Join(errs...); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return err
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
	list, err := listNodes(ctx, o.API)
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
