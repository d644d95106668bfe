// Package podwatch keeps the agent's view of the API server: the pods bound
// to its node, the PriorityClasses (to resolve priorityClassName when
// spec.priority is unset) and, only when priority groups select namespaces
// by label, the namespaces. Informers list once and then watch; there is no
// periodic resync, so an idle node costs the API server nothing but a watch.
package podwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedlisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
)

// Options configure a Watcher.
type Options struct {
	Client   kubernetes.Interface
	NodeName string
	// Namespaces: also watch namespaces, for their labels.
	Namespaces bool
	// OnDelete is called, from an informer goroutine, for every pod of the
	// node deleted from the API server. It must not block.
	OnDelete func(*v1.Pod)
	Log      *zap.Logger
}

// Watcher holds the informers.
type Watcher struct {
	nodeFactory    informers.SharedInformerFactory
	clusterFactory informers.SharedInformerFactory
	podsInformer   cache.SharedIndexInformer
	pods           corelisters.PodLister
	classes        schedlisters.PriorityClassLister
	namespaces     corelisters.NamespaceLister
	synced         []cache.InformerSynced

	mu      sync.Mutex
	started bool
}

// New sets up the informers; Start runs them.
func New(o Options) (*Watcher, error) {
	if o.Client == nil {
		return nil, errors.New("podwatch: no API client")
	}
	if o.NodeName == "" {
		return nil, errors.New("podwatch: no node name")
	}
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	// Resync 0: the lists are never re-read after the initial sync.
	onNode := informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.NodeName).String()
	})
	w := &Watcher{
		nodeFactory:    informers.NewSharedInformerFactoryWithOptions(o.Client, 0, onNode, informers.WithTransform(trim)),
		clusterFactory: informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithTransform(trim)),
	}
	podInf := w.nodeFactory.Core().V1().Pods()
	w.podsInformer = podInf.Informer()
	w.pods = podInf.Lister()
	if o.OnDelete != nil {
		_, err := w.podsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) {
				if p := podOf(obj); p != nil {
					o.OnDelete(p)
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("podwatch: pod handler: %w", err)
		}
	}
	pcInf := w.clusterFactory.Scheduling().V1().PriorityClasses()
	w.classes = pcInf.Lister()
	w.synced = append(w.synced, w.podsInformer.HasSynced, pcInf.Informer().HasSynced)
	if o.Namespaces {
		nsInf := w.clusterFactory.Core().V1().Namespaces()
		w.namespaces = nsInf.Lister()
		w.synced = append(w.synced, nsInf.Informer().HasSynced)
	}
	log.Debug("informers set up", zap.String("node", o.NodeName), zap.Bool("namespaces", o.Namespaces))
	return w, nil
}

// trim drops what evictd never reads from cached objects, to keep the cache
// small on nodes with many pods.
func trim(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
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
	w.started = true
	w.nodeFactory.Start(ctx.Done())
	w.clusterFactory.Start(ctx.Done())
}

// WaitForSync blocks until every informer has listed once, or ctx ends.
func (w *Watcher) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		return fmt.Errorf("podwatch: informers did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Synced reports whether every informer has listed once.
func (w *Watcher) Synced() bool {
	for _, s := range w.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Shutdown waits for the informer goroutines to end; cancel Start's
// context first.
func (w *Watcher) Shutdown() {
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if started {
		w.nodeFactory.Shutdown()
		w.clusterFactory.Shutdown()
	}
}

// Pods returns the node's pods from the cache. They are shared: read only.
func (w *Watcher) Pods() []*v1.Pod {
	pods, err := w.pods.List(labels.Everything())
	if err != nil {
		return nil // the lister's List never fails with Everything
	}
	return pods
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
