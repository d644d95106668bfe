// SPDX-License-Identifier: Apache-2.0

package podwatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/evictd/evictd/pkg/kube/fromclientset"
)

// The informers' success path runs against a real API server in
// pkg/agent's API tests and in test/e2e; these cover the pure helpers and,
// with API errors injected, how a sync fails.

func TestPodOf(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	tests := []struct {
		name string
		obj  any
		want *v1.Pod
	}{
		{"a pod", p, p},
		{"a tombstone of a pod (missed delete)", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: p}, p},
		{"a tombstone of something else", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &v1.Node{}}, nil},
		{"something else", &v1.Node{}, nil},
	}
	for _, tc := range tests {
		if got := podOf(tc.obj); got != tc.want {
			t.Errorf("%s: podOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTrimDropsManagedFields(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := trim(p)
	if err != nil || out.(*v1.Pod).ManagedFields != nil || out.(*v1.Pod).Name != "a" {
		t.Errorf("trim = %+v, %v", out, err)
	}
}

func TestNewRequiresClientAndNode(t *testing.T) {
	if _, err := New(Options{NodeName: "n"}); err == nil {
		t.Error("New without a client: no error")
	}
}

// forbidden is the 403 the API server's RBAC authorizer answers, with its
// own wording. extra is what it appends when nothing matched for a reason.
func forbidden(verb, group, resource, extra string) error {
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", saUser, verb, resource, group)
	if extra != "" {
		msg += ": RBAC: " + extra
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: resource}, "", errors.New(msg))
}

const saUser = "system:serviceaccount:evictd-system:evictd"

// injected returns a fake clientset whose list or watch of one resource
// fails with err. A fake clientset here only injects the API errors a real
// server cannot be made to answer on demand; the informers' success path
// runs against a real API server in pkg/agent and test/e2e.
func injected(verb, resource string, err error) *fake.Clientset {
	cs := fake.NewClientset()
	if verb == "watch" {
		cs.PrependWatchReactor(resource, func(k8stesting.Action) (bool, watch.Interface, error) { return true, nil, err })
	} else {
		cs.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
	}
	return cs
}

// syncedBut reports whether every informer of w but the one of resource
// has listed and opened its watch.
func syncedBut(w *Watcher, resource string) bool {
	for _, in := range w.informers {
		in.mu.Lock()
		watching := in.watching
		in.mu.Unlock()
		if in.resource != resource && (!watching || !in.inf.HasSynced()) {
			return false
		}
	}
	return true
}

func startWatcher(t *testing.T, o Options) (*Watcher, context.CancelFunc) {
	t.Helper()
	o.NodeName = "node-a"
	return startWatcherOn(t, o)
}

func startWatcherOn(t *testing.T, o Options) (*Watcher, context.CancelFunc) {
	t.Helper()
	if o.Log == nil {
		o.Log = zaptest.NewLogger(t)
	}
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	t.Cleanup(func() {
		cancel()
		w.Shutdown()
	})
	return w, cancel
}

func TestWaitForSyncFailsAtOnceWhenForbidden(t *testing.T) {
	tests := []struct {
		name       string
		namespaces bool
		client     *fake.Clientset
		want       []string // substrings of the error
		verb, res  string
	}{
		{
			name:       "list namespaces, for a namespaceSelector",
			namespaces: true,
			client:     injected("list", "namespaces", forbidden("list", "", "namespaces", "")),
			want: []string{"podwatch: cannot list namespaces: forbidden for " + saUser,
				"the ClusterRole needs list and watch on namespaces, used by the namespaceSelectors of priority groups and optOut"},
			verb: "list", res: "namespaces",
		},
		{
			name:   "watch priorityclasses after the list was allowed",
			client: injected("watch", "priorityclasses", forbidden("watch", "scheduling.k8s.io", "priorityclasses", "")),
			want: []string{"podwatch: cannot watch priorityclasses.scheduling.k8s.io: forbidden for " + saUser,
				"needs list and watch on priorityclasses.scheduling.k8s.io, to resolve priorityClassName"},
			verb: "watch", res: "priorityclasses",
		},
		{
			name:   "list nodes, for the images on this node",
			client: injected("list", "nodes", forbidden("list", "", "nodes", "")),
			want: []string{"podwatch: cannot list nodes: forbidden for " + saUser,
				"needs list and watch on nodes, for the images on this node"},
			verb: "list", res: "nodes",
		},
		{
			name:   "list pods with the ClusterRole missing",
			client: injected("list", "pods", forbidden("list", "", "pods", `clusterrole.rbac.authorization.k8s.io "evictd" not found`)),
			want: []string{"cannot list pods: forbidden for " + saUser,
				`(RBAC: clusterrole.rbac.authorization.k8s.io "evictd" not found)`, "needs list and watch on pods, for the informer on this node's pods"},
			verb: "list", res: "pods",
		},
		{
			name:   "a 403 without the authorizer's wording",
			client: injected("list", "pods", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("denied by a webhook"))),
			want:   []string{"cannot list pods: forbidden (pods is forbidden: denied by a webhook)", "needs list and watch on pods"},
			verb:   "list", res: "pods",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A long deadline: the error must come from the 403, not from it.
			w, _ := startWatcher(t, Options{Client: fromclientset.Wrap(tt.client), Namespaces: tt.namespaces, SyncTimeout: time.Minute})
			err := w.WaitForSync(context.Background())
			if err == nil {
				t.Fatal("WaitForSync succeeded despite a 403")
			}
			// The 403 ended the wait, not the minute: said by the error,
			// not by the wall clock.
			if errors.Is(err, ErrSyncTimeout) {
				t.Errorf("WaitForSync = %v: its deadline ended it, want the 403 to", err)
			}
			var ferr *ForbiddenError
			if !errors.As(err, &ferr) {
				t.Fatalf("error %q (%T) is not a *ForbiddenError", err, err)
			}
			if ferr.Verb != tt.verb || ferr.Resource != tt.res {
				t.Errorf("ForbiddenError names %s %s, want %s %s", ferr.Verb, ferr.Resource, tt.verb, tt.res)
			}
			if !apierrors.IsForbidden(err) {
				t.Errorf("apierrors.IsForbidden(%q) = false; the API error must stay wrapped", err)
			}
			if errors.Is(err, ErrSyncTimeout) {
				t.Errorf("a 403 reported as a timeout: %v", err)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines", err)
			}
			if w.Synced() {
				t.Error("Synced() is true after a failed sync")
			}
		})
	}
}

// Without a namespaceSelector namespaces are never listed, so a ClusterRole
// without them is fine.
func TestNamespacesNotWatchedWithoutSelectors(t *testing.T) {
	cs := injected("list", "namespaces", forbidden("list", "", "namespaces", ""))
	w, _ := startWatcher(t, Options{Client: fromclientset.Wrap(cs), SyncTimeout: 10 * time.Second})
	if err := w.WaitForSync(context.Background()); err != nil {
		t.Fatalf("WaitForSync: %v", err)
	}
	if !w.Synced() {
		t.Error("Synced() is false after WaitForSync succeeded")
	}
	if w.NamespaceLabels() != nil {
		t.Error("NamespaceLabels() is not nil without a namespace informer")
	}
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "namespaces" {
			t.Errorf("the API was asked to %s namespaces", a.GetVerb())
		}
	}
}

func TestWaitForSyncDeadline(t *testing.T) {
	const timeout = 400 * time.Millisecond
	unavailable := apierrors.NewServiceUnavailable("etcd is not there")
	w, _ := startWatcher(t, Options{Client: fromclientset.Wrap(injected("list", "pods", unavailable)), SyncTimeout: timeout})
	// The others first: the error must then name only the pods.
	waitFor(t, "the informers but the pods' to sync", func() bool { return syncedBut(w, "pods") })
	start := time.Now()
	err := w.WaitForSync(context.Background())
	took := time.Since(start)
	if err == nil {
		t.Fatal("WaitForSync succeeded while pods cannot be listed")
	}
	if !errors.Is(err, ErrSyncTimeout) {
		t.Errorf("error %q does not wrap ErrSyncTimeout", err)
	}
	if took < timeout {
		t.Errorf("WaitForSync returned after %v, before its %v", took, timeout)
	}
	for _, s := range []string{"within 400ms", "pods not listed yet", "etcd is not there"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "priorityclasses") {
		t.Errorf("error %q names priorityclasses, which synced", err)
	}
	if w.Synced() {
		t.Error("Synced() is true after the deadline")
	}
}

func TestWaitForSyncEndsWithContext(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("down")
	w, _ := startWatcher(t, Options{Client: fromclientset.Wrap(injected("list", "pods", unavailable)), SyncTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// The caller's context error, not ErrSyncTimeout: the context, not
	// the minute's SyncTimeout, ended the wait.
	err := w.WaitForSync(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrSyncTimeout) {
		t.Errorf("WaitForSync = %v, want the caller's context error", err)
	}
}

// A 403 after the sync (a role edited while evictd runs) is logged; the
// agent keeps the cache it has and stays synced.
func TestForbiddenAfterSyncIsLogged(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	cs := fake.NewClientset()
	var deny atomic.Bool
	cs.PrependReactor("list", "priorityclasses", func(k8stesting.Action) (bool, runtime.Object, error) {
		if deny.Load() {
			return true, nil, forbidden("list", "scheduling.k8s.io", "priorityclasses", "")
		}
		return false, nil, nil
	})
	watches := make(chan *watch.FakeWatcher, 10)
	cs.PrependWatchReactor("priorityclasses", func(k8stesting.Action) (bool, watch.Interface, error) {
		fw := watch.NewFake()
		watches <- fw
		return true, fw, nil
	})
	w, _ := startWatcher(t, Options{Client: fromclientset.Wrap(cs), SyncTimeout: 10 * time.Second, Log: zap.New(core)})
	if err := w.WaitForSync(context.Background()); err != nil {
		t.Fatalf("WaitForSync: %v", err)
	}
	deny.Store(true)
	(<-watches).Stop() // the reflector lists again, and is refused
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessage("API access lost; the cache is no longer kept up to date").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged for a 403 after the sync; logs: %v", logs.All())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e := logs.FilterMessage("API access lost; the cache is no longer kept up to date").All()[0]
	if s := fmt.Sprint(e.ContextMap()["err"]); !strings.Contains(s, "cannot list priorityclasses.scheduling.k8s.io") {
		t.Errorf("logged err %q does not name the refused list", s)
	}
	if !w.Synced() {
		t.Error("Synced() turned false after a 403 that came after the sync")
	}
}

func TestNewRejectsNegativeSyncTimeout(t *testing.T) {
	if _, err := New(Options{Client: fromclientset.Wrap(fake.NewClientset()), NodeName: "n", SyncTimeout: -time.Second}); err == nil {
		t.Error("New with a negative SyncTimeout: no error")
	}
}
