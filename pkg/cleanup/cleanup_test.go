// SPDX-License-Identifier: Apache-2.0

package cleanup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/kube"
)

// fakeAPI holds Nodes and Leases in memory and applies the two patches
// pkg/cleanup makes; it exists to inject the API errors a real server
// cannot be made to return on demand (the e2e tests in test/e2e/agent run
// the real thing). conflicts counts the taint patches answered 409 before
// one is applied; forbidStatus refuses every status patch.
type fakeAPI struct {
	nodes        map[string]*v1.Node
	leases       []coordinationv1.Lease
	ers          []lifecyclev1alpha1.EvictionRequest
	ersServed    bool
	conflicts    int
	forbidStatus bool
	deleted      []string
	// listFails answers the next Node lists, one error each; dsFails the
	// next DaemonSet reads.
	listFails []error
	dsFails   []error
	// leaseListFails, leaseDeleteFails, erListFails and erDeleteFails
	// answer the next calls of each kind, one error each.
	leaseListFails, leaseDeleteFails, erListFails, erDeleteFails []error
	// lists records each Node list's field selector ("" for all);
	// statusPatches counts the condition patches.
	lists         []string
	statusPatches int
	// gone names Nodes deleted since they were listed: their patches
	// answer 404. dsDelete answers the DaemonSet's delete; dsStays keeps
	// it there (its pods never go).
	gone     map[string]bool
	dsDelete error
	dsStays  bool
	// beforeLeaseDelete and beforeERDelete, when set, run as a delete
	// arrives, before it is checked: another writer between the list and
	// the delete.
	beforeLeaseDelete, beforeERDelete func(name string)
}

// precondition answers a delete whose preconditions obj no longer meets
// as the API server does (k8s.io/apiserver's rest.BeforeDelete, which
// checks them before the storage does, with these messages; test/e2e's
// TestCleanupDeletesAreConditional reads the real server's): a 409, the
// UID first, then the resourceVersion. nil when obj meets them.
func precondition(gr schema.GroupResource, obj metav1.Object, opts metav1.DeleteOptions) error {
	p := opts.Preconditions
	switch {
	case p == nil:
		return nil
	case p.UID != nil && *p.UID != obj.GetUID():
		return apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf(
			"the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, obj.GetUID()))
	case p.ResourceVersion != nil && *p.ResourceVersion != obj.GetResourceVersion():
		return apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf(
			"the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified",
			*p.ResourceVersion, obj.GetResourceVersion()))
	}
	return nil
}

func (f *fakeAPI) List(_ context.Context, r kube.Resource, opts metav1.ListOptions) (runtime.Object, error) {
	f.lists = append(f.lists, opts.FieldSelector)
	if len(f.listFails) > 0 {
		err := f.listFails[0]
		f.listFails = f.listFails[1:]
		return nil, err
	}
	sel, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return nil, err
	}
	l := &v1.NodeList{}
	for _, n := range f.nodes {
		if sel.Matches(fields.Set{"metadata.name": n.Name}) {
			l.Items = append(l.Items, *n.DeepCopy())
		}
	}
	slices.SortFunc(l.Items, func(a, b v1.Node) int { return strings.Compare(a.Name, b.Name) })
	return l, nil
}

func (f *fakeAPI) PatchNode(_ context.Context, name string, _ types.PatchType, data []byte) (*v1.Node, error) {
	if f.gone[name] {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	if f.conflicts > 0 {
		f.conflicts--
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, name, nil)
	}
	var p struct {
		Spec struct {
			Taints []v1.Taint `json:"taints"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	f.nodes[name].Spec.Taints = p.Spec.Taints
	return f.nodes[name], nil
}

func (f *fakeAPI) PatchNodeStatus(_ context.Context, name string, _ types.PatchType, data []byte) (*v1.Node, error) {
	f.statusPatches++
	if f.gone[name] {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	if f.forbidStatus {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes/status"}, name, nil)
	}
	var p struct {
		Status struct {
			Conditions []struct {
				Type  v1.NodeConditionType `json:"type"`
				Patch string               `json:"$patch"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	n := f.nodes[name]
	for _, c := range p.Status.Conditions {
		if c.Patch == "delete" {
			n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(x v1.NodeCondition) bool { return x.Type == c.Type })
		}
	}
	return n, nil
}

// next pops the first of errs.
func next(errs *[]error) error {
	if len(*errs) == 0 {
		return nil
	}
	err := (*errs)[0]
	*errs = (*errs)[1:]
	return err
}

func (f *fakeAPI) ListLeases(context.Context, string, metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if err := next(&f.leaseListFails); err != nil {
		return nil, err
	}
	return &coordinationv1.LeaseList{Items: slices.Clone(f.leases)}, nil
}

func (f *fakeAPI) DeleteLease(_ context.Context, _, name string, opts metav1.DeleteOptions) error {
	if err := next(&f.leaseDeleteFails); err != nil {
		return err
	}
	if f.beforeLeaseDelete != nil {
		f.beforeLeaseDelete(name)
	}
	i := slices.IndexFunc(f.leases, func(l coordinationv1.Lease) bool { return l.Name == name })
	if i < 0 {
		return apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, name)
	}
	if err := precondition(schema.GroupResource{Group: "coordination.k8s.io", Resource: "Lease"}, &f.leases[i], opts); err != nil {
		return err
	}
	f.leases = slices.DeleteFunc(f.leases, func(l coordinationv1.Lease) bool { return l.Name == name })
	f.deleted = append(f.deleted, "lease "+name)
	return nil
}

func (f *fakeAPI) ListEvictionRequests(_ context.Context, _ string, opts metav1.ListOptions) (*lifecyclev1alpha1.EvictionRequestList, error) {
	if !f.ersServed {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "lifecycle.k8s.io", Resource: "evictionrequests"}, "")
	}
	if err := next(&f.erListFails); err != nil {
		return nil, err
	}
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	l := &lifecyclev1alpha1.EvictionRequestList{}
	for _, er := range f.ers {
		if sel.Matches(labels.Set(er.Labels)) {
			l.Items = append(l.Items, er)
		}
	}
	return l, nil
}

func (f *fakeAPI) DeleteEvictionRequest(_ context.Context, ns, name string, opts metav1.DeleteOptions) error {
	if err := next(&f.erDeleteFails); err != nil {
		return err
	}
	if f.beforeERDelete != nil {
		f.beforeERDelete(name)
	}
	gr := schema.GroupResource{Group: "lifecycle.k8s.io", Resource: "EvictionRequest"}
	i := slices.IndexFunc(f.ers, func(er lifecyclev1alpha1.EvictionRequest) bool { return er.Namespace == ns && er.Name == name })
	if i < 0 {
		return apierrors.NewNotFound(gr, name)
	}
	if err := precondition(gr, &f.ers[i], opts); err != nil {
		return err
	}
	f.ers = slices.DeleteFunc(f.ers, func(er lifecyclev1alpha1.EvictionRequest) bool { return er.Namespace == ns && er.Name == name })
	f.deleted = append(f.deleted, "EvictionRequest "+ns+"/"+name)
	return nil
}

func (f *fakeAPI) DeleteDaemonSet(context.Context, string, string, metav1.DeleteOptions) error {
	return f.dsDelete
}

func (f *fakeAPI) DaemonSetExists(context.Context, string, string) (bool, error) {
	if len(f.dsFails) > 0 {
		err := f.dsFails[0]
		f.dsFails = f.dsFails[1:]
		return true, err
	}
	return f.dsStays, nil
}

// waitClock is a fake clock whose waits end at once, moving it on by each;
// it keeps them, so that a test reads the back-off (Run makes its calls
// on the test's goroutine).
type waitClock struct {
	*clocktesting.FakeClock
	waits []time.Duration
	// onWait, when set, is told the number of each wait as it begins.
	onWait func(n int)
}

func (c *waitClock) After(d time.Duration) <-chan time.Time {
	c.waits = append(c.waits, d)
	if c.onWait != nil {
		c.onWait(len(c.waits))
	}
	c.Step(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

func newWaitClock() *waitClock {
	return &waitClock{FakeClock: clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))}
}

// backedOff reports whether waits double from about 1 s, each drawn from
// the upper half of its step ([step/2, step]), as package backoff draws.
func backedOff(waits []time.Duration) bool {
	step := time.Second
	for _, w := range waits {
		if w < step/2 || w > step {
			return false
		}
		step = min(2*step, 30*time.Second)
	}
	return true
}

func braked(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "example.com/dedicated", Effect: v1.TaintEffectNoSchedule},
			{Key: "evictd.io/memory-pressure", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue},
			{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue}}}}
}

func lease(name, holder string) coordinationv1.Lease {
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "evictd-system", UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)}}
}

// TestRun: a taint write that conflicts is read again and retried; the
// EvictionRequests not served are no failure; the kubelet's lease of a
// node named evictd-kubelet stays; nothing is left.
func TestRun(t *testing.T) {
	f := &fakeAPI{nodes: map[string]*v1.Node{"a": braked("a"), "b": braked("b")}, conflicts: 1,
		leases: []coordinationv1.Lease{lease("evictd-a", "evictd-system/evictd-x1"), lease("evictd-b", "host_42"),
			lease("evictd-kubelet", "evictd-kubelet"), lease("a", "a")}}
	clk := newWaitClock()
	res, err := Run(context.Background(), Options{API: f, Install: "evictd-system/evictd", LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: clk})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// One list of every Node, the conflicted one read again alone after a
	// back-off, and the last step's list.
	if want := []string{"", "metadata.name=a", ""}; !slices.Equal(f.lists, want) || len(clk.waits) != 1 || !backedOff(clk.waits) {
		t.Errorf("Node lists %q with waits %v; want %q, one wait of 0.5 to 1 s before the conflicted Node is read again", f.lists, clk.waits, want)
	}
	if res.TaintsRemoved != 2 || res.ConditionsRemoved != 2 || res.LeasesDeleted != 2 || res.EvictionRequestsServed || len(res.Left) != 0 {
		t.Errorf("Run: %+v; want 2 taints, 2 conditions, 2 leases, EvictionRequests not served, nothing left", res)
	}
	if want := []string{"lease evictd-a", "lease evictd-b"}; !slices.Equal(f.deleted, want) {
		t.Errorf("deleted %v; want %v (never a kubelet's lease)", f.deleted, want)
	}
	for _, n := range f.nodes {
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "example.com/dedicated" || len(n.Status.Conditions) != 1 {
			t.Errorf("node %s: taints %v, conditions %v; want the other taint and Ready only", n.Name, n.Spec.Taints, n.Status.Conditions)
		}
	}
}

// TestRunLeft: a write refused for good fails Run, which names what is
// left; it is made once, not once per attempt.
func TestRunLeft(t *testing.T) {
	f := &fakeAPI{nodes: map[string]*v1.Node{"a": braked("a")}, forbidStatus: true}
	clk := newWaitClock()
	res, err := Run(context.Background(), Options{API: f, Install: "evictd-system/evictd", LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: clk})
	if f.statusPatches != 1 || len(clk.waits) != 0 {
		t.Errorf("the refused condition patch was made %d times, with waits %v; want once: the same patch meets the same refusal", f.statusPatches, clk.waits)
	}
	if err == nil || !strings.Contains(err.Error(), "condition EvictdMemoryPressure=True on node a") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("Run: %v; want it to fail naming the condition left on node a and the refusal", err)
	}
	if want := []string{"condition EvictdMemoryPressure=True on node a"}; !slices.Equal(res.Left, want) {
		t.Errorf("Left %v; want %v", res.Left, want)
	}
}

func TestParseDaemonSet(t *testing.T) {
	for _, s := range []string{"evictd", "/evictd", "ns/", "a/b/c", ""} {
		if _, _, err := ParseDaemonSet(s); err == nil || !strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("ParseDaemonSet(%q): %v; want an error naming the value", s, err)
		}
	}
	if ns, n, err := ParseDaemonSet("evictd-system/evictd"); err != nil || ns != "evictd-system" || n != "evictd" {
		t.Errorf("ParseDaemonSet(evictd-system/evictd) = %q, %q, %v", ns, n, err)
	}
}

// TestRunBacksOff: while the API server cannot serve (503, 429, no
// answer), the Nodes' list and the DaemonSet's read are tried again after
// a back-off that doubles from about 1 s, jittered, never at once nor at a
// fixed pace; a cleanup stops trying after Attempts.
func TestRunBacksOff(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	shed := apierrors.NewTooManyRequests("Too many requests, please try again later.", 1)
	t.Run("the Nodes' list", func(t *testing.T) {
		f := &fakeAPI{nodes: map[string]*v1.Node{"a": braked("a")}, listFails: []error{unavailable, shed, unavailable, shed}}
		clk := newWaitClock()
		res, err := Run(context.Background(), Options{API: f, Install: "evictd-system/evictd", LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: clk})
		if err != nil || res.TaintsRemoved != 1 {
			t.Fatalf("Run: %+v, %v; want the taint removed once the list passed", res, err)
		}
		if len(clk.waits) != 4 || !backedOff(clk.waits) {
			t.Errorf("4 failed lists were followed by waits %v; want 4, doubling from 1 s, each in the upper half of its step", clk.waits)
		}
	})
	t.Run("until the context ends", func(t *testing.T) {
		f := &fakeAPI{nodes: map[string]*v1.Node{"a": braked("a")}, listFails: slices.Repeat([]error{unavailable}, 1000)}
		clk := newWaitClock()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		clk.onWait = func(n int) {
			if n == 12 {
				cancel() // evictd cleanup's --timeout
			}
		}
		_, err := Run(ctx, Options{API: f, Install: "evictd-system/evictd", LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: clk})
		if !apierrors.IsServiceUnavailable(err) || len(clk.waits) != 12 || !backedOff(clk.waits) {
			t.Errorf("Run = %v after waits %v; want the 503 once the context ended, after 12 waits of the back-off", err, clk.waits)
		}
	})
	t.Run("the DaemonSet's read", func(t *testing.T) {
		f := &fakeAPI{nodes: map[string]*v1.Node{}, dsFails: []error{unavailable, shed, unavailable}}
		clk := newWaitClock()
		if _, err := Run(context.Background(), Options{API: f, Install: "evictd-system/evictd", LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent",
			DaemonSet: "evictd-system/evictd", Clock: clk}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(clk.waits) != 3 || !backedOff(clk.waits) {
			t.Errorf("3 failed reads of the DaemonSet were followed by waits %v; want 3, doubling from 1 s, each in the upper half of its step", clk.waits)
		}
	})
}

// Two installs share the cluster (and the leases' namespace): the first,
// evictd-system/evictd, is uninstalled; the second's state must stay.
const (
	firstID, firstMark   = "evictd-system/evictd", "evictd-system.evictd"
	secondID, secondMark = "evictd-system/second-evictd", "evictd-system.second-evictd"
)

func markedLease(name, holder, id string) coordinationv1.Lease {
	l := lease(name, holder)
	if id != "" {
		l.Annotations = map[string]string{install.Annotation: id}
	}
	return l
}

func er(name, requester, mark string) lifecyclev1alpha1.EvictionRequest {
	e := lifecyclev1alpha1.EvictionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"evictd.io/node": "a"},
		UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: lifecyclev1alpha1.EvictionRequestSpec{Requester: requester}}
	if mark != "" {
		e.Labels[install.Label] = mark
	}
	return e
}

// TestRunTakesBackOnlyItsOwn: the uninstall of one install removes its
// own taints, conditions, leases and EvictionRequests and those no install
// marks (an older evictd's), and leaves the other install's, the
// kubelet's lease and another requester's request; Left names none of
// the other install's, so the uninstall succeeds.
func TestRunTakesBackOnlyItsOwn(t *testing.T) {
	mine := braked("a")
	mine.Spec.Taints[1].Value = firstMark
	mine.Status.Conditions[1].Message = "memory pressure (evictd install " + firstID + ")"
	theirs := braked("b")
	theirs.Spec.Taints[1].Value = secondMark
	theirs.Status.Conditions[1].Message = "memory pressure (evictd install " + secondID + ")"
	old := braked("c") // an older evictd's: no value, no install named
	f := &fakeAPI{nodes: map[string]*v1.Node{"a": mine, "b": theirs, "c": old}, ersServed: true,
		leases: []coordinationv1.Lease{markedLease("evictd-a", "evictd-system/evictd-x1", firstID),
			markedLease("evictd-b", "evictd-system/second-evictd-y1", secondID),
			markedLease("evictd-c", "evictd-system/evictd-x2", ""), lease("evictd-kubelet", "evictd-kubelet")},
		ers: []lifecyclev1alpha1.EvictionRequest{er("evictd-1", "evictd.io/node-agent", firstMark), er("evictd-2", "evictd.io/node-agent", secondMark),
			er("evictd-3", "evictd.io/node-agent", ""), er("drainer-4", "example.com/drainer", "")}}
	res, err := Run(context.Background(), Options{API: f, Install: firstID, LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: newWaitClock()})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.TaintsRemoved != 2 || res.ConditionsRemoved != 2 || res.LeasesDeleted != 2 || res.EvictionRequestsDeleted != 2 {
		t.Errorf("Run: %+v; want 2 taints, 2 conditions, 2 leases, 2 EvictionRequests (the install's own and the unmarked ones)", res)
	}
	want := []string{"lease evictd-a", "lease evictd-c", "EvictionRequest shop/evictd-1", "EvictionRequest shop/evictd-3"}
	if !slices.Equal(f.deleted, want) {
		t.Errorf("deleted %v; want %v", f.deleted, want)
	}
	if b := f.nodes["b"]; len(b.Spec.Taints) != 2 || b.Spec.Taints[1].Value != secondMark || len(b.Status.Conditions) != 2 {
		t.Errorf("the other install's node: taints %v, conditions %v; want its brake untouched", b.Spec.Taints, b.Status.Conditions)
	}
	for _, n := range []string{"a", "c"} {
		if len(f.nodes[n].Spec.Taints) != 1 || len(f.nodes[n].Status.Conditions) != 1 {
			t.Errorf("node %s: taints %v, conditions %v; want the brake lifted", n, f.nodes[n].Spec.Taints, f.nodes[n].Status.Conditions)
		}
	}
}

// TestRunRetriesLeasesAndEvictionRequests: a lease or EvictionRequest
// call the API server cannot serve (503, 429, no answer) or that conflicts
// is made again after a back-off from a fresh list, as the Nodes' are; a
// refused one (403) is not, and fails the run naming it.
func TestRunRetriesLeasesAndEvictionRequests(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	shed := apierrors.NewTooManyRequests("Too many requests, please try again later.", 1)
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "evictd-a", nil)
	noAnswer := errors.New("dial tcp 127.0.0.1:443: connect: connection refused")
	t.Run("transient", func(t *testing.T) {
		f := &fakeAPI{nodes: map[string]*v1.Node{}, ersServed: true,
			leases:         []coordinationv1.Lease{markedLease("evictd-a", "evictd-system/evictd-x1", firstID)},
			leaseListFails: []error{noAnswer}, leaseDeleteFails: []error{unavailable, conflict},
			ers:         []lifecyclev1alpha1.EvictionRequest{er("evictd-1", "evictd.io/node-agent", firstMark)},
			erListFails: []error{shed}, erDeleteFails: []error{unavailable}}
		clk := newWaitClock()
		res, err := Run(context.Background(), Options{API: f, Install: firstID, LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: clk})
		if err != nil || res.LeasesDeleted != 1 || res.EvictionRequestsDeleted != 1 {
			t.Fatalf("Run: %+v, %v; want the lease and the EvictionRequest deleted once the API server served them", res, err)
		}
		// The leases: a list and two deletes tried again; the requests: a
		// list and a delete. Each step's back-off starts again from 1 s.
		if len(clk.waits) != 5 || !backedOff(clk.waits[:3]) || !backedOff(clk.waits[3:]) {
			t.Errorf("waits %v; want 3 for the leases and 2 for the requests, each doubling from about 1 s", clk.waits)
		}
	})
	t.Run("refused", func(t *testing.T) {
		forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "evictd-a", errors.New("refused by evictd-cleanup-deletes"))
		f := &fakeAPI{nodes: map[string]*v1.Node{},
			leases:           []coordinationv1.Lease{markedLease("evictd-a", "evictd-system/evictd-x1", firstID)},
			leaseDeleteFails: []error{forbidden}}
		clk := newWaitClock()
		_, err := Run(context.Background(), Options{API: f, Install: firstID, LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: clk})
		if err == nil || !strings.Contains(err.Error(), "delete lease evictd-system/evictd-a") || !strings.Contains(err.Error(), "lease evictd-system/evictd-a") ||
			len(clk.waits) != 0 {
			t.Errorf("Run = %v after waits %v; want the refusal and the lease left named, with no retry", err, clk.waits)
		}
	})
	t.Run("refused beside a retry", func(t *testing.T) {
		// The refused delete is not made again when the other lease's
		// retry lists the leases afresh: the same request meets the same
		// rules (and a policy that refuses it once may not refuse a
		// second, blind, delete).
		forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "evictd-a", errors.New("refused by evictd-cleanup-deletes"))
		f := &fakeAPI{nodes: map[string]*v1.Node{},
			leases: []coordinationv1.Lease{markedLease("evictd-a", "evictd-system/evictd-x1", firstID),
				markedLease("evictd-b", "evictd-system/evictd-x2", firstID)},
			leaseDeleteFails: []error{forbidden, unavailable}}
		clk := newWaitClock()
		res, err := Run(context.Background(), Options{API: f, Install: firstID, LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: clk})
		if want := []string{"lease evictd-b"}; !slices.Equal(f.deleted, want) || res.LeasesDeleted != 1 {
			t.Errorf("deleted %v (%+v); want %v: the refused lease's delete made once", f.deleted, res, want)
		}
		if err == nil || !strings.Contains(err.Error(), "delete lease evictd-system/evictd-a") || !slices.Equal(res.Left, []string{"lease evictd-system/evictd-a"}) {
			t.Errorf("Run = %v, left %v; want the refusal and the refused lease left named", err, res.Left)
		}
	})
}

// TestRunLeavesWhatChangedSinceListed: every delete is conditional on the
// object as listed (its UID and resourceVersion). A lease another
// install's agent took over between the list and the delete (renewed
// under its own holder: same UID, new version) and an EvictionRequest
// another install made anew under the same name (a new UID) are refused
// by the API server (409), and the fresh list that follows no longer
// counts them as this install's: both stay, and the run succeeds.
func TestRunLeavesWhatChangedSinceListed(t *testing.T) {
	f := &fakeAPI{nodes: map[string]*v1.Node{}, ersServed: true,
		leases: []coordinationv1.Lease{markedLease("evictd-a", "evictd-system/evictd-x1", firstID)},
		ers:    []lifecyclev1alpha1.EvictionRequest{er("evictd-1", "evictd.io/node-agent", firstMark)}}
	var leaseDeletes, erDeletes int
	f.beforeLeaseDelete = func(string) {
		if leaseDeletes++; leaseDeletes == 1 {
			taken := markedLease("evictd-a", "evictd-system/second-evictd-y1", secondID)
			taken.ResourceVersion = "2"
			f.leases[0] = taken
		}
	}
	f.beforeERDelete = func(string) {
		if erDeletes++; erDeletes == 1 {
			anew := er("evictd-1", "evictd.io/node-agent", secondMark)
			anew.UID, anew.ResourceVersion = "uid-evictd-1-anew", "3"
			f.ers[0] = anew
		}
	}
	clk := newWaitClock()
	res, err := Run(context.Background(), Options{API: f, Install: firstID, LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: clk})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.LeasesDeleted != 0 || res.EvictionRequestsDeleted != 0 || len(f.deleted) != 0 {
		t.Errorf("Run: %+v, deleted %v; want nothing deleted: what was listed changed hands before its delete", res, f.deleted)
	}
	if len(f.leases) != 1 || *f.leases[0].Spec.HolderIdentity != "evictd-system/second-evictd-y1" {
		t.Errorf("leases %v; want the lease the other install's agent took over kept", f.leases)
	}
	if len(f.ers) != 1 || f.ers[0].UID != "uid-evictd-1-anew" {
		t.Errorf("EvictionRequests %v; want the one the other install made anew kept", f.ers)
	}
	// Each refused delete is followed by one back-off and a fresh list.
	if leaseDeletes != 1 || erDeletes != 1 || len(clk.waits) != 2 {
		t.Errorf("%d lease and %d EvictionRequest deletes, waits %v; want one of each, each refusal followed by one wait and a fresh list",
			leaseDeletes, erDeletes, clk.waits)
	}
}

// TestRunGoneMeanwhile: what is gone by the time cleanup writes it (a
// Node deleted since the list, a lease or an EvictionRequest deleted by
// its holder, the DaemonSet deleted already) has nothing left to take
// back: no failure.
func TestRunGoneMeanwhile(t *testing.T) {
	f := &fakeAPI{nodes: map[string]*v1.Node{"a": braked("a")}, gone: map[string]bool{"a": true}, ersServed: true,
		dsDelete: apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "evictd"),
		leases:   []coordinationv1.Lease{markedLease("evictd-a", "evictd-system/evictd-x1", firstID)},
		ers:      []lifecyclev1alpha1.EvictionRequest{er("evictd-1", "evictd.io/node-agent", firstMark)}}
	// Each deleted just before cleanup's delete arrives; the Node is gone
	// for the last step's list as well.
	f.beforeLeaseDelete = func(string) { f.leases, f.nodes = nil, map[string]*v1.Node{} }
	f.beforeERDelete = func(string) { f.ers = nil }
	res, err := Run(context.Background(), Options{API: f, Install: firstID, LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent",
		DaemonSet: firstID, Clock: newWaitClock()})
	if err != nil || len(res.Left) != 0 {
		t.Errorf("Run: %+v, %v; want no failure: what went meanwhile has nothing to take back", res, err)
	}
}

// TestRunDaemonSetPodsStay: while the DaemonSet is still there (its pods
// not gone) when the context ends, Run fails saying so, and takes nothing
// back: an agent still running may put its brake back.
func TestRunDaemonSetPodsStay(t *testing.T) {
	f := &fakeAPI{nodes: map[string]*v1.Node{"a": braked("a")}, dsStays: true}
	clk := newWaitClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.onWait = func(n int) {
		if n == 5 {
			cancel()
		}
	}
	res, err := Run(ctx, Options{API: f, Install: firstID, LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", DaemonSet: firstID, Clock: clk})
	if err == nil || !strings.Contains(err.Error(), "DaemonSet evictd-system/evictd still has pods") {
		t.Errorf("Run = %v; want it to fail naming the DaemonSet whose pods are still there", err)
	}
	if res.TaintsRemoved != 0 || len(f.lists) != 0 {
		t.Errorf("Run: %+v, Node lists %q; want nothing taken back while the agents may still run", res, f.lists)
	}
}

// TestRunRejectsMissingOptions: a Run without its install, its leases'
// namespace or its requester fails at once, naming what is missing.
func TestRunRejectsMissingOptions(t *testing.T) {
	good := Options{API: &fakeAPI{nodes: map[string]*v1.Node{}}, Install: firstID, LeaseNamespace: "evictd-system", Requester: "evictd.io/node-agent", Clock: newWaitClock()}
	for name, mutate := range map[string]func(*Options){
		"Install":        func(o *Options) { o.Install = "" },
		"LeaseNamespace": func(o *Options) { o.LeaseNamespace = "" },
		"Requester":      func(o *Options) { o.Requester = "" },
	} {
		o := good
		mutate(&o)
		if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Run without %s: %v; want an error naming it", name, err)
		}
	}
}

// TestLeftNamesOnlyABrakeOn: an evictd condition at False is no brake
// (an agent's lift sets it so): Left does not name it.
func TestLeftNamesOnlyABrakeOn(t *testing.T) {
	n := braked("a")
	n.Spec.Taints = n.Spec.Taints[:1]
	n.Status.Conditions[1].Status = v1.ConditionFalse
	left, err := Left(context.Background(), Options{API: &fakeAPI{nodes: map[string]*v1.Node{"a": n}}, Install: firstID, LeaseNamespace: "evictd-system",
		Requester: "evictd.io/node-agent", Clock: newWaitClock()})
	if err != nil || len(left) != 0 {
		t.Errorf("Left = %v, %v; want nothing: the condition at False keeps no pod away", left, err)
	}
}
