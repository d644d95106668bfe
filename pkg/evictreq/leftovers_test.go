// SPDX-License-Identifier: Apache-2.0

package evictreq

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/kube/fromclientset"
)

func podWith(name string, u types.UID) *v1.Pod {
	p := testPod()
	p.Name, p.UID = name, u
	return p
}

// At start evictd ends the requests an earlier evictd on this node left:
// with its requester, for a pod of this node, intent Eviction: withdrawn,
// then deleted; already withdrawn: deleted. Another requester's, a pod of
// another node's, and a pod asked for since start are left alone.
func TestWithdrawLeftovers(t *testing.T) {
	h := newHarness(t, time.Minute)
	ctx := context.Background()
	open := podWith("open", "11111111-1111-4111-8111-111111111111")
	withdrawn := podWith("withdrawn", "22222222-2222-4222-8222-222222222222")
	elsewhere := podWith("elsewhere", "33333333-3333-4333-8333-333333333333")
	theirs := podWith("theirs", "44444444-4444-4444-8444-444444444444")
	asked := podWith("asked", "55555555-5555-4555-8555-555555555555")
	add := func(p *v1.Pod, requester string, intent lifecyclev1alpha1.EvictionRequestIntent) {
		er := Build(p, requester)
		er.Spec.Intent = intent
		if _, err := h.api.CreateEvictionRequest(ctx, er); err != nil {
			t.Fatal(err)
		}
	}
	add(open, DefaultRequester, lifecyclev1alpha1.EvictionRequestIntentEviction)
	add(withdrawn, DefaultRequester, lifecyclev1alpha1.EvictionRequestIntentWithdrawn)
	add(elsewhere, DefaultRequester, lifecyclev1alpha1.EvictionRequestIntentEviction)
	add(theirs, "example.com/drainer", lifecyclev1alpha1.EvictionRequestIntentEviction)
	add(asked, DefaultRequester, lifecyclev1alpha1.EvictionRequestIntentEviction)
	h.api.writes = nil
	h.ev.touch(ctx, asked.UID) // Evict asked for it since start

	did, err := h.ev.WithdrawLeftovers(ctx, []*v1.Pod{open, withdrawn, theirs, asked})
	if err != nil {
		t.Fatal(err)
	}
	if did != (Leftovers{Found: 3, Withdrawn: 1, Deleted: 2}) {
		t.Errorf("WithdrawLeftovers = %+v; want 3 found, 1 withdrawn, 2 deleted", did)
	}
	want := []string{"update " + Name(open.UID) + " intent=Withdrawn", "delete " + Name(open.UID), "delete " + Name(withdrawn.UID)}
	w := h.api.writesMade()
	slices.Sort(w)
	slices.Sort(want)
	if !slices.Equal(w, want) {
		t.Errorf("writes %q; want %q", w, want)
	}
	for _, p := range []*v1.Pod{elsewhere, theirs, asked} {
		er, err := h.api.GetEvictionRequest(ctx, "shop", Name(p.UID))
		if err != nil || er.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction {
			t.Errorf("request for %s: %v, %v; want it left with intent Eviction", p.Name, er, err)
		}
	}
	// Done: the pods asked for are no longer recorded.
	h.ev.touch(ctx, open.UID)
	if h.ev.touched != nil {
		t.Errorf("pods still recorded after the sweep: %v", h.ev.touched)
	}
}

// A request changed since it was listed (asked again meanwhile) is not
// ended: the writes are conditional on the listed resourceVersion.
func TestWithdrawLeftoversConditional(t *testing.T) {
	h := newHarness(t, time.Minute)
	ctx := context.Background()
	p := podWith("raced", "66666666-6666-4666-8666-666666666666")
	stale := staleCopy(t, h, Build(p, DefaultRequester))
	withdrawn, deleted, err := h.ev.endLeftover(ctx, stale)
	if withdrawn || deleted || err != nil {
		t.Errorf("endLeftover of a stale copy = %v, %v, %v; want nothing done", withdrawn, deleted, err)
	}
}

// A leftover already withdrawn is deleted at once, with no update first:
// its delete alone is conditional on the request as listed, so that one
// written since (a responder's status, a request made anew) stays.
func TestWithdrawLeftoversConditionalDelete(t *testing.T) {
	h := newHarness(t, time.Minute)
	ctx := context.Background()
	p := podWith("raced", "77777777-7777-4777-8777-777777777777")
	left := Build(p, DefaultRequester)
	left.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
	stale := staleCopy(t, h, left)
	h.api.writes = nil
	withdrawn, deleted, err := h.ev.endLeftover(ctx, stale)
	if withdrawn || deleted || err != nil {
		t.Errorf("endLeftover of a stale withdrawn copy = %v, %v, %v; want nothing done", withdrawn, deleted, err)
	}
	if _, err := h.api.GetEvictionRequest(ctx, "shop", Name(p.UID)); err != nil {
		t.Errorf("the request written since it was listed: %v; want it kept", err)
	}
	if w := h.api.writesMade(); len(w) != 0 {
		t.Errorf("writes %q; want none: the delete conditional on the listed version was refused", w)
	}
}

// The list answered 404: the API is not served, and the path switches off
// at start, as on a create's 404.
func TestWithdrawLeftoversNotServed(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "evictionrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(erResource, "")
	})
	client := fromclientset.Wrap(cs)
	var said []bool
	ev, err := New(Config{Imperative: imperative(t, client), API: client, Pods: clientsetInformer(cs), ResponderWait: time.Minute, Logger: zap.NewNop(),
		Served: func(on bool) { said = append(said, on) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.WithdrawLeftovers(context.Background(), nil); !apierrors.IsNotFound(err) {
		t.Errorf("WithdrawLeftovers error %v; want the 404", err)
	}
	if !slices.Equal(said, []bool{false}) || !ev.offNow() {
		t.Errorf("Served told %v, off %v; want [false], off", said, ev.offNow())
	}
}

// In dry run the start-up search writes nothing.
func TestWithdrawLeftoversDryRun(t *testing.T) {
	api := newMemAPI()
	left := Build(testPod(), DefaultRequester)
	if _, err := api.CreateEvictionRequest(context.Background(), left); err != nil {
		t.Fatal(err)
	}
	api.writes = nil
	o := evict.Defaults()
	o.DryRun = true
	imp, err := evict.New(evict.Config{Options: o, Client: &podAPI{}, NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := New(Config{Imperative: imp, API: api, Pods: api.informer, ResponderWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.WithdrawLeftovers(context.Background(), []*v1.Pod{testPod()}); err != nil {
		t.Fatal(err)
	}
	if w := api.writesMade(); len(w) != 0 {
		t.Errorf("writes %q in dry run; want none", w)
	}
}

// Beside another install of evictd, the start-up sweep ends only its own
// install's leftovers and those no install marks (an older evictd's);
// another install's request stays with intent Eviction.
func TestWithdrawLeftoversOfItsInstall(t *testing.T) {
	h := newHarness(t, time.Minute)
	h.ev.mark = install.Mark("evictd-system/evictd")
	ctx := context.Background()
	own := podWith("own", "11111111-1111-4111-8111-111111111111")
	unmarked := podWith("unmarked", "22222222-2222-4222-8222-222222222222")
	other := podWith("other", "33333333-3333-4333-8333-333333333333")
	for p, mark := range map[*v1.Pod]string{own: h.ev.mark, unmarked: "", other: install.Mark("evictd-system/second-evictd")} {
		er := Build(p, DefaultRequester)
		if mark != "" {
			er.Labels[install.Label] = mark
		}
		if _, err := h.api.CreateEvictionRequest(ctx, er); err != nil {
			t.Fatal(err)
		}
	}
	h.api.writes = nil
	did, err := h.ev.WithdrawLeftovers(ctx, []*v1.Pod{own, unmarked, other})
	if err != nil || did != (Leftovers{Found: 2, Withdrawn: 2, Deleted: 2}) {
		t.Errorf("WithdrawLeftovers = %+v, %v; want its own and the unmarked one found, withdrawn and deleted", did, err)
	}
	if er, err := h.api.GetEvictionRequest(ctx, "shop", Name(other.UID)); err != nil || er.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction {
		t.Errorf("the other install's request: %v, %v; want it left with intent Eviction", er, err)
	}
}

// staleCopy creates req and returns it as listed, before a write made to it
// since (a responder's status, a request made anew).
func staleCopy(t *testing.T, h *harness, req *lifecyclev1alpha1.EvictionRequest) *lifecyclev1alpha1.EvictionRequest {
	t.Helper()
	ctx := context.Background()
	if _, err := h.api.CreateEvictionRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	er, err := h.api.GetEvictionRequest(ctx, req.Namespace, req.Name)
	if err != nil {
		t.Fatal(err)
	}
	stale := er.DeepCopy()
	if _, err := h.api.UpdateEvictionRequest(ctx, er); err != nil {
		t.Fatal(err)
	}
	return stale
}
