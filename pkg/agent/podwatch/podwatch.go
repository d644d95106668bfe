// SPDX-License-Identifier: Apache-2.0

// Package podwatch keeps the agent's view of the API server: the pods bound
// to its node, the PriorityClasses (to resolve priorityClassName when
// spec.priority is unset) and, only when priority groups select namespaces
// by label, the namespaces. Informers list once (a streaming list, a watch
// with sendInitialEvents, where the API server serves one) and then watch;
// there is no periodic resync, so an idle node costs the API server nothing but a watch.
//
// Every list and watch goes through this package's own ListWatch, so that a
// 403 Forbidden is seen where it happens, with its verb and resource: the
// initial sync then fails at once with an error naming the permission the
// ClusterRole lacks, instead of client-go retrying the forbidden list for
// ever. The sync also has a deadline (Options.SyncTimeout) for every other
// reason an informer cannot list (an API server that is down or too slow).
// A list or watch failing for a reason that passes is tried again by the
// same ListWatch, with a back-off that an answer to any other call of
// evictd's cuts short (retry.go): after an API outage the view is current
// again within a second of the first eviction answered, not a minute later.
package podwatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedlisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/logging"
)

// ErrSyncTimeout is wrapped by WaitForSync's error when the informers have
// not synced within the timeout.
var ErrSyncTimeout = errors.New("informers did not sync in time")

// syncPoll is how often WaitForSync looks at the informers; a Forbidden
// answer wakes it at once.
const syncPoll = 50 * time.Millisecond

// ListWatcher lists and watches a resource in all namespaces; *kube.Client
// satisfies it, and tests use a clientset fake through fromclientset.
type ListWatcher interface {
	List(ctx context.Context, r kube.Resource, opts metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, r kube.Resource, opts metav1.ListOptions) (watch.Interface, error)
}

// Options configure a Watcher.
type Options struct {
	Client   ListWatcher
	NodeName string
	// Namespaces: also watch namespaces, for their labels.
	Namespaces bool
	// OnDelete is called, from an informer goroutine, for every pod of the
	// node deleted from the API server. It must not block.
	OnDelete func(*v1.Pod)
	// Evicted, when set, is called (from an informer goroutine, without
	// blocking) for every pod of the node whose status reads as the
	// kubelet's eviction manager leaves a pod it evicted: phase Failed,
	// reason Evicted. It comes from the informer on the node's pods, so
	// it costs the API server nothing more: as the pod turns so, as it is
	// listed so (at start, or again after a watch broke), and as it is
	// deleted (its last known state, a tombstone's included, in case the
	// update that made it so was missed). One pod may come several times.
	// Shadow mode (pkg/shadow) reads the kubelet's evictions from it.
	Evicted func(*v1.Pod)
	// SyncTimeout bounds WaitForSync; 0 means kube.DefaultSyncTimeout.
	SyncTimeout time.Duration
	// RetryMin and RetryMax bound the back-off between tries of a failing
	// list or watch (see retry.go); 0 means DefaultRetryMin, DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	Log                *zap.Logger
}

// Watcher holds the informers.
type Watcher struct {
	log         *zap.Logger
	syncTimeout time.Duration
	informers   []*informer
	pods        corelisters.PodLister
	classes     schedlisters.PriorityClassLister
	namespaces  corelisters.NamespaceLister
	nodes       corelisters.NodeLister
	nodeName    string

	mu       sync.Mutex
	started  bool
	wg       sync.WaitGroup
	waitDone bool  // WaitForSync has returned: a Forbidden is no longer fatal
	fatal    error // the first Forbidden answer before that
	failed   chan struct{}

	retryMin, retryMax time.Duration
	retryMu            sync.Mutex
	retryNow           chan struct{} // closed by Retry
}

// informer is one resource's informer and what its list and watch calls
// have answered so far.
type informer struct {
	resource string // plural, as in RBAC rules
	group    string // API group, "" for core
	why      string // what evictd uses it for, for error messages
	inf      cache.SharedIndexInformer

	mu       sync.Mutex
	watching bool  // a watch was opened since the last list
	lastErr  error // the last failed list or watch
}

// New sets up the informers; Start runs them.
func New(o Options) (*Watcher, error) {
	if o.Client == nil {
		return nil, errors.New("podwatch: no API client")
	}
	if o.NodeName == "" {
		return nil, errors.New("podwatch: no node name")
	}
	if o.SyncTimeout < 0 {
		return nil, fmt.Errorf("podwatch: negative sync timeout %v", o.SyncTimeout)
	}
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	if o.RetryMin < 0 || o.RetryMax < o.RetryMin {
		return nil, fmt.Errorf("podwatch: retry back-off from %v to %v", o.RetryMin, o.RetryMax)
	}
	w := &Watcher{log: log, syncTimeout: o.SyncTimeout, failed: make(chan struct{}), nodeName: o.NodeName,
		retryMin: o.RetryMin, retryMax: o.RetryMax, retryNow: make(chan struct{})}
	if w.syncTimeout == 0 {
		w.syncTimeout = kube.DefaultSyncTimeout
	}
	if w.retryMin == 0 {
		w.retryMin = DefaultRetryMin
	}
	if w.retryMax == 0 {
		w.retryMax = max(DefaultRetryMax, w.retryMin)
	}

	// Only this node's pods; RBAC cannot restrict this, the selector does.
	onNode := fields.OneTermEqualSelector("spec.nodeName", o.NodeName).String()
	pods := w.add(o.Client, kube.Pods, onNode, "for the informer on this node's pods", &v1.Pod{},
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	w.pods = corelisters.NewPodLister(pods.GetIndexer())
	if o.OnDelete != nil || o.Evicted != nil {
		evicted := func(obj any) {
			if p := podOf(obj); o.Evicted != nil && p != nil && kubeletEvicted(p) {
				o.Evicted(p)
			}
		}
		_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { evicted(obj) },
			UpdateFunc: func(_, obj any) { evicted(obj) },
			DeleteFunc: func(obj any) {
				evicted(obj)
				if p := podOf(obj); o.OnDelete != nil && p != nil {
					o.OnDelete(p)
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("podwatch: pod handler: %w", err)
		}
	}

	// Only this node, for the images on it (status.images), which the
	// kubelet's image garbage collection can delete.
	thisNode := fields.OneTermEqualSelector("metadata.name", o.NodeName).String()
	nodes := w.add(o.Client, kube.Nodes, thisNode,
		"for the images on this node, which the kubelet's image garbage collection frees before a disk eviction", &v1.Node{}, cache.Indexers{})
	w.nodes = corelisters.NewNodeLister(nodes.GetIndexer())

	classes := w.add(o.Client, kube.PriorityClasses, "",
		"to resolve priorityClassName when a pod has no spec.priority", &schedulingv1.PriorityClass{}, cache.Indexers{})
	w.classes = schedlisters.NewPriorityClassLister(classes.GetIndexer())

	if o.Namespaces {
		nss := w.add(o.Client, kube.Namespaces, "", "used by the namespaceSelectors of priority groups and optOut", &v1.Namespace{}, cache.Indexers{})
		w.namespaces = corelisters.NewNamespaceLister(nss.GetIndexer())
	}
	log.Debug("informers set up", zap.String("node", o.NodeName), zap.Bool("namespaces", o.Namespaces),
		zap.Duration("syncTimeout", w.syncTimeout))
	return w, nil
}

// add builds the informer of resource r, restricted by the field selector
// (if any), on list and watch calls that record what the API server
// answers. why is what evictd needs r for, for a Forbidden error. Resync 0:
// the lists are never re-read after the initial sync.
func (w *Watcher) add(client ListWatcher, r kube.Resource, selector, why string, obj runtime.Object, idx cache.Indexers) cache.SharedIndexInformer {
	in := &informer{resource: r.String(), group: r.Group(), why: why}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			in.mu.Lock()
			in.watching = false
			in.mu.Unlock()
			lo.FieldSelector = selector
			var out runtime.Object
			err := w.withRetry(ctx, in, "list", func() (err error) {
				out, err = client.List(ctx, r, lo)
				w.answered(in, "list", err, false)
				return err
			})
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			lo.FieldSelector = selector
			var out watch.Interface
			err := w.withRetry(ctx, in, "watch", func() (err error) {
				out, err = client.Watch(ctx, r, lo)
				w.answered(in, "watch", err, err == nil)
				return err
			})
			return out, err
		},
	}
	// Since client-go 1.35 (WatchListClient on by default) a reflector's
	// initial list is a watch with sendInitialEvents (a streaming list), so a
	// missing grant shows as "cannot watch". A client that says it cannot
	// serve one (client-go's fake clientset, in tests) is listed and then
	// watched as before: the wrapper passes its answer to the reflector,
	// which sees only this ListWatch otherwise.
	in.inf = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), obj, cache.SharedIndexInformerOptions{
		Indexers: idx, ObjectDescription: in.resource,
	})
	// Both only fail once the informer has started.
	_ = in.inf.SetTransform(trim)
	_ = in.inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		switch {
		case apierrors.IsForbidden(err):
			return // answered has reported it, with what to grant
		case ctx.Err() != nil:
			return // a call cut short by Shutdown is no error
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	w.informers = append(w.informers, in)
	return in.inf
}

// answered records one list or watch answer. A Forbidden one before
// WaitForSync has returned makes it fail at once; after that the cache
// keeps what it has and the error is logged, since evicting with a
// slightly stale view beats not protecting the node at all.
func (w *Watcher) answered(in *informer, verb string, err error, watching bool) {
	in.mu.Lock()
	if err == nil {
		in.watching = in.watching || watching
	} else {
		in.lastErr = err
	}
	in.mu.Unlock()
	if err == nil {
		w.Retry() // the API server is back: the others need not wait
		return
	}
	if !apierrors.IsForbidden(err) {
		return
	}
	ferr := &ForbiddenError{Verb: verb, Resource: in.resource, Group: in.group, Why: in.why, Err: err}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waitDone {
		w.log.Error("API access lost; the cache is no longer kept up to date", logging.Err(ferr))
		return
	}
	if w.fatal == nil {
		w.fatal = ferr
		close(w.failed)
	}
}

// ForbiddenError is a list or watch the API server refused with 403: the
// ClusterRole lacks the grant.
type ForbiddenError struct {
	Verb     string // list or watch
	Resource string // plural, as in RBAC rules
	Group    string // API group, "" for core
	Why      string // what evictd needs it for
	Err      error  // the API server's answer
}

// forbiddenUser finds the user in the API server's Forbidden message.
var forbiddenUser = regexp.MustCompile(`User "([^"]*)"`)

func (e *ForbiddenError) Error() string {
	res := e.Resource
	if e.Group != "" {
		res += "." + e.Group
	}
	who := ""
	msg := e.Err.Error()
	if m := forbiddenUser.FindStringSubmatch(msg); m != nil {
		who = " for " + m[1]
		// The RBAC authorizer appends why nothing matched (a missing
		// ClusterRole, say); keep that, it is the rest of the story.
		if _, rest, ok := strings.Cut(msg, ": RBAC: "); ok {
			who += " (RBAC: " + rest + ")"
		}
	} else {
		who = " (" + msg + ")"
	}
	return fmt.Sprintf("podwatch: cannot %s %s: forbidden%s (the ClusterRole needs list and watch on %s, %s)",
		e.Verb, res, who, res, e.Why)
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

// trim drops what evictd never reads from cached objects, to keep the cache
// small on nodes with many pods.
func trim(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

// kubeletEvicted reports whether p's status is the one the kubelet's
// eviction manager writes on a pod it evicts (pkg/shadow reads the rest).
func kubeletEvicted(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted"
}

func podOf(obj any) *v1.Pod {
	switch t := obj.(type) {
	case *v1.Pod:
		return t
	case cache.DeletedFinalStateUnknown:
		p, _ := t.Obj.(*v1.Pod)
		return p
	}
	return nil
}

// Start runs the informers until ctx ends; Shutdown waits for them.
func (w *Watcher) Start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return
	}
	w.started = true
	for _, in := range w.informers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			in.inf.RunWithContext(ctx)
		}()
	}
}

// WaitForSync blocks until every informer has listed once and opened its
// watch. It fails at once when the API server forbids a list or watch (a
// *ForbiddenError naming the missing grant), after the sync timeout
// otherwise (wrapping ErrSyncTimeout and naming what is missing), or when
// ctx ends.
func (w *Watcher) WaitForSync(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, w.syncTimeout, ErrSyncTimeout)
	defer cancel()
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	for {
		w.mu.Lock()
		fatal := w.fatal
		if fatal == nil && w.synced() {
			w.waitDone = true
		}
		done := w.waitDone
		w.mu.Unlock()
		if fatal != nil {
			return fatal
		}
		if done {
			return nil
		}
		select {
		case <-w.failed:
		case <-tick.C:
		case <-ctx.Done():
			if cause := context.Cause(ctx); errors.Is(cause, ErrSyncTimeout) {
				return fmt.Errorf("podwatch: %w within %v: %s", ErrSyncTimeout, w.syncTimeout, w.pending())
			}
			return fmt.Errorf("podwatch: informers did not sync: %w", context.Cause(ctx))
		}
	}
}

// pending describes the informers that have not synced, with the last
// error each saw.
func (w *Watcher) pending() string {
	var parts []string
	for _, in := range w.informers {
		in.mu.Lock()
		watching, lastErr := in.watching, in.lastErr
		in.mu.Unlock()
		var s string
		switch {
		case !in.inf.HasSynced():
			s = in.resource + " not listed yet"
		case !watching:
			s = in.resource + " listed but not watched yet"
		default:
			continue
		}
		if lastErr != nil {
			s += " (last error: " + lastErr.Error() + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "every informer synced at the deadline"
	}
	return strings.Join(parts, "; ")
}

// synced reports whether every informer has listed once and has a watch
// open, or had one since its last list.
func (w *Watcher) synced() bool {
	for _, in := range w.informers {
		in.mu.Lock()
		watching := in.watching
		in.mu.Unlock()
		if !watching || !in.inf.HasSynced() {
			return false
		}
	}
	return true
}

// Synced reports whether WaitForSync has succeeded: every informer has
// listed once and opened its watch.
func (w *Watcher) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waitDone && w.fatal == nil
}

// Shutdown waits for the informer goroutines to end; cancel Start's
// context first.
func (w *Watcher) Shutdown() {
	w.wg.Wait()
}

// Pods returns the node's pods from the cache, in UID order. They are
// shared: read only. The lister's own order is its map's, another at each
// call: a pass's decisions must not depend on it, and the trace records
// the pod list again only when it differs from the last one recorded.
func (w *Watcher) Pods() []*v1.Pod {
	pods, err := w.pods.List(labels.Everything())
	if err != nil {
		return nil // the lister's List never fails with Everything
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int { return cmp.Compare(a.UID, b.UID) })
	return pods
}

// Node returns this node's object from the cache (shared: read only), or
// nil when it is not there.
func (w *Watcher) Node() *v1.Node {
	n, err := w.nodes.Get(w.nodeName)
	if err != nil {
		return nil
	}
	return n
}

// PriorityClasses maps every PriorityClass name to its value.
func (w *Watcher) PriorityClasses() map[string]int32 {
	pcs, err := w.classes.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make(map[string]int32, len(pcs))
	for _, pc := range pcs {
		out[pc.Name] = pc.Value
	}
	return out
}

// NamespaceLabels maps namespace names to their labels; nil when namespaces
// are not watched.
func (w *Watcher) NamespaceLabels() map[string]map[string]string {
	if w.namespaces == nil {
		return nil
	}
	nss, err := w.namespaces.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make(map[string]map[string]string, len(nss))
	for _, ns := range nss {
		out[ns.Name] = ns.Labels
	}
	return out
}
