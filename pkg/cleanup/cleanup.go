// SPDX-License-Identifier: Apache-2.0

// Package cleanup takes back what one install of evictd wrote to a
// cluster, for its uninstall: its node brake on every Node (evictd's
// taints and conditions), its agents' node Leases, and the
// EvictionRequests its agents made. Each of these names the install that
// wrote it (package install); another install's are left alone, so that
// uninstalling one of two installs leaves the other's brakes, leases and
// requests in place. What an evictd older than the install marks wrote
// names no install, and every uninstall takes it back. Optionally it
// first deletes the install's DaemonSet and waits for its pods to be
// gone, so that running agents lift their own brakes and none is left to
// put one back afterwards. The Helm chart's pre-delete hook runs it
// (evictd cleanup), and docs/install.md's kustomize uninstall.
//
// Every write is conditional on the object as read, a call the API server
// could not serve is made again after a back-off until the context ends,
// and the last step reads everything again: Run reports what is left,
// never that it hopes nothing is.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/backoff"
	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/install"
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
	// Install is the install to take back (its ID, "NAMESPACE/NAME" of its
	// DaemonSet; package install). Required.
	Install string
	// LeaseNamespace holds the agents' node leases (the agents'
	// --node-lease-namespace).
	LeaseNamespace string
	// Requester is the spec.requester of evictd's EvictionRequests.
	Requester string
	// DaemonSet, "namespace/name", is deleted first and waited for; "" for
	// none.
	DaemonSet string
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

// DefaultPoll is how often the DaemonSet's deletion is checked.
const DefaultPoll = time.Second

// The back-off between tries (package backoff: doubling, with jitter):
// from about retryInitial to retryMax, so that a cleanup meeting an API
// server in trouble (5xx, 429, no answer) or a write that conflicts with
// another writer's asks again every few seconds at first and twice a
// minute at the most, for as long as its context lasts (evictd cleanup's
// --timeout). A refusal (403, 422) is not asked again: the same request
// meets the same rules.
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

// Run takes back what the install wrote; ctx bounds it (the wait for the
// DaemonSet's pods and every retry included). The error is nil only when
// nothing of the install's is left.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if o.API == nil || o.LeaseNamespace == "" || o.Requester == "" || o.Install == "" {
		return res, errors.New("cleanup: API, Install, LeaseNamespace and Requester must be set")
	}
	if _, err := install.Parse(o.Install); err != nil {
		return res, fmt.Errorf("cleanup: %w", err)
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
	o.Log = o.Log.With(zap.String("install", o.Install))
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
	err = try(ctx, o, nil, "delete the DaemonSet "+o.DaemonSet, func() error {
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

// try makes call until it succeeds, fails for good (not retryable) or ctx
// ends, backing off between the tries on wait (nil: a back-off of its own;
// a step's calls share one, so that an API server in trouble is asked
// less often the longer it is), and returns its last error.
func try(ctx context.Context, o Options, wait *backoff.Backoff, what string, call func() error) error {
	if wait == nil {
		wait = newBackoff()
	}
	for {
		err := call()
		if err == nil || !retryable(err) {
			return err
		}
		if !pause(ctx, o, wait, what, err) {
			return err
		}
	}
}

func newBackoff() *backoff.Backoff {
	return &backoff.Backoff{Initial: retryInitial, Max: retryMax}
}

// pause logs a retryable failure of what and waits the back-off's next
// step; false when ctx ends first.
func pause(ctx context.Context, o Options, wait *backoff.Backoff, what string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	d := wait.Next()
	o.Log.Warn("cannot "+what+" now; trying again", zap.Duration("retryIn", d.Round(time.Millisecond)), logging.Err(err))
	return sleep(ctx, o.Clock, d)
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

// nodes lifts the install's brake on every Node (nodebrake.LiftOwn): its
// taints dropped, its conditions deleted; another install's stay. A Node
// whose writes can pass when tried again (a conflict: someone wrote it in
// between; the API server in trouble) is read again alone and tried again
// after the back-off, until ctx ends; the Nodes are listed once.
func nodes(ctx context.Context, o Options, res *Result) error {
	wait := newBackoff()
	var list []v1.Node
	if err := try(ctx, o, wait, "list the Nodes", func() (err error) {
		list, err = listNodes(ctx, o.API, metav1.ListOptions{})
		return err
	}); err != nil {
		return err
	}
	// final holds the errors no try can change; again, below, those of the
	// last try of the Nodes tried again.
	var final []error
	pending := list
	for {
		var again []v1.Node
		var errs []error
		for i := range pending {
			retry, refused := node(ctx, o, &pending[i], res)
			if refused != nil {
				final = append(final, refused)
			}
			if retry != nil {
				again = append(again, pending[i])
				errs = append(errs, retry)
			}
		}
		if len(again) == 0 || !pause(ctx, o, wait, fmt.Sprintf("lift the brake on %d Nodes", len(again)), errors.Join(errs...)) {
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

// node lifts the install's brake on n: retry is the failure a later try
// may pass, refused the one it cannot. A Node gone meanwhile has nothing
// to lift.
func node(ctx context.Context, o Options, n *v1.Node, res *Result) (retry, refused error) {
	var retries, refusals []error
	sort := func(err error) {
		switch {
		case apierrors.IsNotFound(err):
		case retryable(err):
			retries = append(retries, err)
		default:
			refusals = append(refusals, err)
		}
	}
	taints, equal, condPatch, removedTaints, removedConds := nodebrake.LiftOwn(n, o.Install, install.Mark(o.Install))
	// Taints first: their patch is conditional on the resourceVersion
	// read, which the condition write would change.
	if !equal {
		if _, err := o.API.PatchNode(ctx, n.Name, types.MergePatchType, nodebrake.TaintPatch(n, taints)); err != nil {
			sort(fmt.Errorf("node %s: remove taints %s: %w", n.Name, strings.Join(removedTaints, ", "), err))
		} else {
			res.TaintsRemoved += len(removedTaints)
			o.Log.Info("removed evictd's taints", zap.String("node", n.Name), zap.Strings("taints", removedTaints))
		}
	}
	if condPatch != nil {
		if _, err := o.API.PatchNodeStatus(ctx, n.Name, types.StrategicMergePatchType, condPatch); err != nil {
			sort(fmt.Errorf("node %s: remove conditions %s: %w", n.Name, strings.Join(removedConds, ", "), err))
		} else {
			res.ConditionsRemoved += len(removedConds)
			o.Log.Info("removed evictd's conditions", zap.String("node", n.Name), zap.Strings("conditions", removedConds))
		}
	}
	return errors.Join(retries...), errors.Join(refusals...)
}

// leases deletes the install's node leases (nodelease.Owned: the
// kubelet's and another install's are never touched), each conditional on
// the version read. A delete that can pass when tried again (a conflict:
// the lease was written since; the API server in trouble) is tried again
// after the back-off from a fresh list, until ctx ends: a lease another
// install's agent took over meanwhile is no longer this install's.
func leases(ctx context.Context, o Options, res *Result) error {
	return deleteOwn(ctx, o, "lease", "node leases", func(wait *backoff.Backoff) ([]coordinationv1.Lease, bool, error) {
		list, err := listLeases(ctx, o, wait)
		return list, true, err
	}, func(l *coordinationv1.Lease) error {
		uid, rv := l.UID, l.ResourceVersion
		err := o.API.DeleteLease(ctx, l.Namespace, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if err == nil {
			res.LeasesDeleted++
			o.Log.Info("deleted evictd's node lease", zap.String("lease", l.Namespace+"/"+l.Name), zap.String("holder", *l.Spec.HolderIdentity))
		}
		return err
	})
}

// deleteOwn deletes what list finds (of kind; what, plural, in the log)
// with del, each conditional on the
// version listed, and tries again from a fresh list after the back-off
// while a delete failed in a way that can pass, until ctx ends: what
// another install's agent took over meanwhile is no longer listed. A
// refused delete is not tried again; a gone object is not an error.
// served false from list: the API server does not serve the kind.
func deleteOwn[T any, PT interface {
	*T
	metav1.Object
}](ctx context.Context, o Options, kind, what string, list func(*backoff.Backoff) ([]T, bool, error), del func(PT) error) error {
	refused := map[string]error{}
	wait := newBackoff()
	for {
		found, served, err := list(wait)
		if err != nil || !served {
			return errors.Join(append(values(refused), err)...)
		}
		var errs []error
		for i := range found {
			obj := PT(&found[i])
			key := obj.GetNamespace() + "/" + obj.GetName()
			if refused[key] != nil {
				continue
			}
			switch err := del(obj); {
			case err == nil, apierrors.IsNotFound(err):
			case retryable(err):
				errs = append(errs, fmt.Errorf("delete %s %s: %w", kind, key, err))
			default:
				refused[key] = fmt.Errorf("delete %s %s: %w", kind, key, err)
			}
		}
		if len(errs) == 0 || !pause(ctx, o, wait, "delete the "+what, errors.Join(errs...)) {
			return errors.Join(append(values(refused), errs...)...)
		}
	}
}

// listLeases lists the install's node leases, trying again while the API
// server cannot answer.
func listLeases(ctx context.Context, o Options, wait *backoff.Backoff) ([]coordinationv1.Lease, error) {
	var list *coordinationv1.LeaseList
	if err := try(ctx, o, wait, "list the node leases", func() (err error) {
		list, err = o.API.ListLeases(ctx, o.LeaseNamespace, metav1.ListOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("list leases in %s: %w", o.LeaseNamespace, err)
	}
	var own []coordinationv1.Lease
	for _, l := range list.Items {
		if nodelease.Owned(&l, o.Install) {
			own = append(own, l)
		}
	}
	return own, nil
}

// evictionRequests deletes the install's EvictionRequests in every
// namespace (a deletion is the requester's withdrawal), as leases deletes
// the leases: tried again from a fresh list while a delete can pass. A 404
// on the list means the API server does not serve them.
func evictionRequests(ctx context.Context, o Options, res *Result) error {
	return deleteOwn(ctx, o, "EvictionRequest", "EvictionRequests", func(wait *backoff.Backoff) ([]lifecyclev1alpha1.EvictionRequest, bool, error) {
		found, served, err := listEvictionRequests(ctx, o, wait)
		res.EvictionRequestsServed = served
		return found, served, err
	}, func(er *lifecyclev1alpha1.EvictionRequest) error {
		uid, rv := er.UID, er.ResourceVersion
		err := o.API.DeleteEvictionRequest(ctx, er.Namespace, er.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if err == nil {
			res.EvictionRequestsDeleted++
			o.Log.Info("deleted evictd's EvictionRequest", zap.String("evictionRequest", er.Namespace+"/"+er.Name))
		}
		return err
	})
}

// listEvictionRequests lists the install's EvictionRequests: those of
// evictd's requester labelled with its mark, and those labelled with no
// install (an older evictd's), each selected by the API server.
func listEvictionRequests(ctx context.Context, o Options, wait *backoff.Backoff) (found []lifecyclev1alpha1.EvictionRequest, served bool, err error) {
	mark := install.Mark(o.Install)
	own, _ := labels.NewRequirement(install.Label, selection.Equals, []string{mark})
	unmarked, _ := labels.NewRequirement(install.Label, selection.DoesNotExist, nil)
	for _, sel := range []labels.Selector{labels.NewSelector().Add(*own), labels.NewSelector().Add(*unmarked)} {
		opts := metav1.ListOptions{Limit: 500, LabelSelector: sel.String()}
		for {
			var list *lifecyclev1alpha1.EvictionRequestList
			err := try(ctx, o, wait, "list the EvictionRequests", func() (err error) {
				list, err = o.API.ListEvictionRequests(ctx, metav1.NamespaceAll, opts)
				return err
			})
			switch {
			case apierrors.IsNotFound(err):
				return nil, false, nil
			case err != nil:
				return nil, true, fmt.Errorf("list EvictionRequests: %w", err)
			}
			for i := range list.Items {
				if evictreq.Owned(&list.Items[i], o.Requester, mark) {
					found = append(found, list.Items[i])
				}
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
	}
	return found, true, nil
}

func values(m map[string]error) []error {
	out := make([]error, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// Left reads the cluster again and names what the install wrote that is
// still there (and what an evictd older than the install marks wrote): a
// taint of evictd's prefix, an evictd condition at True, an agent's node
// lease, an EvictionRequest of evictd's requester. Another install's is
// not named.
func Left(ctx context.Context, o Options) ([]string, error) {
	var left []string
	var errs []error
	mark := install.Mark(o.Install)
	var list []v1.Node
	wait := newBackoff()
	err := try(ctx, o, wait, "list the Nodes", func() (err error) {
		list, err = listNodes(ctx, o.API, metav1.ListOptions{})
		return err
	})
	errs = append(errs, err)
	for _, n := range list {
		for _, t := range n.Spec.Taints {
			if nodebrake.OwnTaint(t, mark) {
				left = append(left, fmt.Sprintf("taint %s:%s on node %s", t.Key, t.Effect, n.Name))
			}
		}
		for _, c := range n.Status.Conditions {
			if nodebrake.OwnCondition(c, o.Install) && c.Status == v1.ConditionTrue {
				left = append(left, fmt.Sprintf("condition %s=True on node %s", c.Type, n.Name))
			}
		}
	}
	leases, err := listLeases(ctx, o, wait)
	errs = append(errs, err)
	for _, l := range leases {
		left = append(left, "lease "+l.Namespace+"/"+l.Name)
	}
	ers, _, err := listEvictionRequests(ctx, o, wait)
	errs = append(errs, err)
	for _, er := range ers {
		left = append(left, "EvictionRequest "+er.Namespace+"/"+er.Name)
	}
	return left, errors.Join(errs...)
}
