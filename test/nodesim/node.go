// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/evictd/evictd/test/internal/stale"
)

// cgroupPrefix names the parent cgroup of each simulated node (see package
// stale), directly under the hierarchy roots.
const cgroupPrefix = "evictd-test"

// SimulatedLabel marks Nodes registered by this package.
const SimulatedLabel = "evictd.test/simulated"

// Node is a running simulated node.
type Node struct {
	// Name of the Node object.
	Name string
	// HostRoot is this node's "/": evictd's --host-root. It holds sys and
	// proc (links to the real ones), var/lib/kubelet, var/log/pods and the
	// image store var/lib/containerd.
	HostRoot string
	// CgroupRoot is the node cgroup's path inside each hierarchy (v1) or
	// the unified one (v2), e.g.
	// /evictd-test-123-0a1b2c3d/node-a: evictd's --cgroup-root, and its
	// --node-cgroup too, so that this cgroup's memory is the node's. The
	// kubelet's kubepods tree is below it.
	CgroupRoot string

	opts   Options
	log    *zap.Logger
	cg     cgroups
	disk   *hostRoot
	ctx    context.Context // ends when the node stops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	stopping  bool
	runners   map[types.UID]*podRunner
	finished  map[types.UID]bool
	timelines map[types.UID]*Timeline
	oomKills  int
	nextIP    int
	// faultRoots are the fault roots made by NewFaultRoot, closed by Stop.
	faultRoots []*FaultRoot
	// cgroups are the node's own cgroups (parent, node, kubepods, the QoS
	// cgroups, those of CreateCgroup) in the order made; Stop removes them
	// last first. Pod cgroups belong to their runners.
	cgroups []cgroup

	stopOnce sync.Once
	stopErr  error
}

// Start creates the node's cgroups and host root, registers the Node object
// and starts running the pods bound to it, until Stop or ctx ends. On error,
// whatever was created is removed again.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if err := opts.defaultAndValidate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(opts.CgroupFS)
	if err != nil {
		return nil, err
	}
	log := opts.Logger.With(zap.String("node", opts.Name))
	sweepStale(cg, opts.TempDir, log)

	parent := stale.Name(cgroupPrefix)
	n = &Node{
		Name:       opts.Name,
		CgroupRoot: "/" + path.Join(parent, opts.Name),
		opts:       opts,
		log:        log,
		cg:         cg,
		runners:    map[types.UID]*podRunner{},
		finished:   map[types.UID]bool{},
		timelines:  map[types.UID]*Timeline{},
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("start simulated node %s: %w", opts.Name, err)
			n.cleanUpHost()
		}
	}()
	if err := n.createCgroups(parent); err != nil {
		return n, err
	}
	if n.disk, err = newHostRoot(opts.TempDir, opts.DiskBytes, opts.DiskInodes); err != nil {
		return n, err
	}
	n.HostRoot = n.disk.root
	if err := n.register(ctx); err != nil {
		return n, err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.ctx, n.cancel = runCtx, cancel
	inf := podInformer(opts.Client, opts.Name)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.dispatch(obj, false) },
		UpdateFunc: func(_, obj any) { n.dispatch(obj, false) },
		DeleteFunc: func(obj any) { n.dispatch(obj, true) },
	}); err != nil {
		cancel()
		return n, err
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		inf.RunWithContext(runCtx)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		n.wg.Wait()
		return n, errors.New("pod informer did not sync")
	}
	// Stop when the caller's context ends, as documented.
	go func() {
		select {
		case <-ctx.Done():
			n.Stop()
		case <-runCtx.Done():
		}
	}()
	log.Info("simulated node running", zap.String("cgroups", n.CgroupVersion()), zap.String("hostRoot", n.HostRoot), zap.String("cgroupRoot", n.CgroupRoot))
	return n, nil
}

func (n *Node) createCgroups(parent string) error {
	kubepods := path.Join(n.CgroupRoot, kubepodsDir)
	steps := []struct {
		rel             string
		memory, maxPIDs int64
	}{
		{rel: "/" + parent, memory: -1},
		{rel: n.CgroupRoot, memory: n.opts.MemoryBytes, maxPIDs: n.opts.MaxPIDs},
		{rel: kubepods, memory: n.allocatableMemory()},
		{rel: path.Join(kubepods, burstableDir), memory: -1},
		{rel: path.Join(kubepods, besteffortDir), memory: -1},
	}
	for _, s := range steps {
		cg, err := n.createCgroup(s.rel)
		if err != nil {
			return err
		}
		if err := cg.setLimits(s.memory, s.maxPIDs); err != nil {
			return err
		}
	}
	return nil
}

// createCgroup makes one of the node's own cgroups and keeps it for Stop.
func (n *Node) createCgroup(rel string) (cgroup, error) {
	cg, err := n.cg.create(rel)
	if err != nil {
		return cg, err
	}
	n.mu.Lock()
	n.cgroups = append(n.cgroups, cg)
	n.mu.Unlock()
	return cg, nil
}

func (n *Node) runCtx() context.Context { return n.ctx }

func (n *Node) allocatableMemory() int64 { return n.opts.MemoryBytes - n.opts.ReservedMemoryBytes }

// register creates the Node object with capacity and allocatable taken from
// the real cgroup limit and filesystem.
func (n *Node) register(ctx context.Context) error {
	diskBytes, err := n.disk.capacity()
	if err != nil {
		return err
	}
	cpu, err := resource.ParseQuantity(n.opts.CPU)
	if err != nil {
		return fmt.Errorf("CPU %q: %w", n.opts.CPU, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              cpu,
		corev1.ResourceMemory:           *resource.NewQuantity(n.opts.MemoryBytes, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(n.opts.Pods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(diskBytes, resource.BinarySI),
	}
	allocatable := capacity.DeepCopy()
	allocatable[corev1.ResourceMemory] = *resource.NewQuantity(n.allocatableMemory(), resource.BinarySI)
	now := metav1.NewTime(n.opts.Clock.Now())
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name,
			Labels: map[string]string{
				corev1.LabelHostname: n.Name,
				corev1.LabelOSStable: "linux", corev1.LabelArchStable: runtime.GOARCH,
				SimulatedLabel: "true",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: hostIP}, {Type: corev1.NodeHostName, Address: n.Name}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: "linux", Architecture: runtime.GOARCH,
				KubeletVersion: "v1.37.2-nodesim", ContainerRuntimeVersion: "nodesim://1",
			},
		},
	}
	created, err := n.opts.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("register Node: %w", err)
	}
	// Status sent with a create is kept for Nodes today; writing it through
	// the status subresource as well does not depend on that. A controller
	// may write the Node in between (the node lifecycle controller taints a
	// new Node), so a conflict is retried on a fresh read, as the kubelet's
	// updateNodeStatus retries tryUpdateNodeStatus.
	cur := created
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			var err error
			if cur, err = n.opts.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		cur.Status = node.Status
		_, err := n.opts.Client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		cur = nil
		return err
	})
	if err != nil {
		return fmt.Errorf("set Node status: %w", err)
	}
	return nil
}

// hostIP is the address pods report as status.hostIP.
const hostIP = "127.0.0.1"

// dispatch routes an informer event to the pod's runner, starting one for a
// pod seen the first time.
func (n *Node) dispatch(obj any, gone bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopping {
		return
	}
	r := n.runners[pod.UID]
	if r == nil {
		if gone || n.finished[pod.UID] || terminalPhase(pod.Status.Phase) && pod.DeletionTimestamp == nil {
			return
		}
		n.nextIP++
		tl := &Timeline{}
		n.timelines[pod.UID] = tl
		r = newPodRunner(n, pod, fmt.Sprintf("10.244.%d.%d", n.nextIP/250%250, n.nextIP%250+1))
		n.runners[pod.UID] = r
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			r.run()
			n.mu.Lock()
			delete(n.runners, pod.UID)
			n.finished[pod.UID] = true
			n.mu.Unlock()
		}()
	}
	if gone {
		r.markGone()
	} else {
		r.update(pod)
	}
}

func terminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

// Evict evicts the running pod with uid as the kubelet's eviction manager
// does for a hard threshold, and returns once its status is written: its
// processes are killed and its cgroups removed, and the pod is left in the
// API with phase Failed, reason Evicted, message and a DisruptionTarget
// condition (reason TerminationByKubelet), written through pods/status.
// It fails for a pod this node does not run, or no longer runs.
func (n *Node) Evict(ctx context.Context, uid types.UID, message string) error {
	n.mu.Lock()
	r := n.runners[uid]
	n.mu.Unlock()
	if r == nil {
		return fmt.Errorf("nodesim: node %s runs no pod %s", n.Name, uid)
	}
	c := evictCall{message: message, done: make(chan error, 1)}
	select {
	case r.evicts <- c:
	case <-r.done:
		return fmt.Errorf("nodesim: pod %s is gone from node %s", uid, n.Name)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Record returns the timeline of a pod this node has run.
func (n *Node) Record(uid types.UID) (Timeline, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	tl, ok := n.timelines[uid]
	if !ok {
		return Timeline{}, false
	}
	return *tl, true
}

// WaitRecord polls the pod's timeline until cond holds or ctx ends.
func (n *Node) WaitRecord(ctx context.Context, uid types.UID, cond func(Timeline) bool) (Timeline, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		tl, ok := n.Record(uid)
		if ok && cond(tl) {
			return tl, nil
		}
		select {
		case <-ctx.Done():
			return tl, fmt.Errorf("pod %s on node %s: timeline %+v: %w", uid, n.Name, tl, ctx.Err())
		case <-t.C:
		}
	}
}

func (n *Node) setTimeline(uid types.UID, f func(*Timeline)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if tl, ok := n.timelines[uid]; ok {
		f(tl)
	}
}

// OOMKills is how many processes the kernel OOM killer has killed in this
// node's pods so far.
func (n *Node) OOMKills() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.oomKills
}

func (n *Node) addOOMKills(k int) {
	n.mu.Lock()
	n.oomKills += k
	n.mu.Unlock()
}

// CgroupVersion is "v1" or "v2": which cgroup hierarchy the node's cgroups
// are in.
func (n *Node) CgroupVersion() string { return n.cg.version() }

// MemoryCgroupDir is the node cgroup's directory in the memory hierarchy
// (on v2, the unified one).
func (n *Node) MemoryCgroupDir() string { return n.cg.memoryDir(n.CgroupRoot) }

// PidsCgroupDir is the node cgroup's directory in the pids hierarchy (on
// v2, the same as MemoryCgroupDir).
func (n *Node) PidsCgroupDir() string { return n.cg.pidsDir(n.CgroupRoot) }

// PodMemoryCgroupDir is the pod's cgroup directory in the memory hierarchy.
func (n *Node) PodMemoryCgroupDir(pod *corev1.Pod) string {
	return filepath.Join(n.MemoryCgroupDir(), PodCgroup(pod))
}

// PodPidsCgroupDir is the pod's cgroup directory in the pids hierarchy.
func (n *Node) PodPidsCgroupDir(pod *corev1.Pod) string {
	return filepath.Join(n.PidsCgroupDir(), PodCgroup(pod))
}

// EmptyDirPath is where the pod's emptyDir volume lives on this node.
func (n *Node) EmptyDirPath(uid types.UID, volume string) string {
	return n.disk.emptyDir(uid, volume)
}

// PodLogDir is the pod's directory under var/log/pods.
func (n *Node) PodLogDir(pod *corev1.Pod) string {
	return n.disk.podLogDir(pod)
}

// ImageFSDir is the image store (var/lib/containerd) under HostRoot.
func (n *Node) ImageFSDir() string { return n.disk.imageFS() }

// ContainerPIDs returns the main process of each running container of the
// pod, by container name.
func (n *Node) ContainerPIDs(uid types.UID) map[string]int {
	n.mu.Lock()
	r := n.runners[uid]
	n.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.pids()
}

// Stop stops every pod's processes (SIGKILL), removes the node's cgroups,
// unmounts its filesystem, removes its host root and deletes the Node object
// when the API server still answers. It is safe to call more than once and
// returns the same error each time.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		n.mu.Lock()
		n.stopping = true
		n.mu.Unlock()
		if n.cancel != nil {
			n.cancel()
		}
		n.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := n.opts.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			n.log.Debug("could not delete the Node object", zap.Error(err))
		}
		n.stopErr = n.cleanUpHost()
		n.log.Info("simulated node stopped", zap.Error(n.stopErr))
	})
	return n.stopErr
}

func (n *Node) cleanUpHost() error {
	var errs []error
	// Fault roots first: their mounts sit on files of the node cgroup.
	if err := n.closeFaultRoots(); err != nil {
		errs = append(errs, err)
	}
	if err := n.removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if n.disk != nil {
		if err := n.disk.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the node's own cgroups, last made first, and with
// them whatever a pod runner could not remove below them. It stops at the
// first failure: the cgroups above would fail the same way, each after the
// same wait; the next Start sweeps what is left.
func (n *Node) removeCgroups() error {
	n.mu.Lock()
	cgs := n.cgroups
	n.cgroups = nil
	n.mu.Unlock()
	for i := len(cgs) - 1; i >= 0; i-- {
		if err := n.cg.remove(cgs[i], cgroupRemoveTimeout); err != nil {
			return err
		}
	}
	return nil
}

// sweepStale removes what simulated nodes of dead processes left behind.
func sweepStale(cg cgroups, tempDir string, log *zap.Logger) {
	// Fault roots first: their mounts sit on files of the node cgroups.
	if err := stale.Sweep(tempDir, faultRootPrefix, removeFaultRoot); err != nil {
		log.Warn("could not remove stale fault roots", zap.Error(err))
	}
	// On v1 a stale cgroup is found in either hierarchy and removed from both.
	for _, root := range cg.roots() {
		if err := stale.Sweep(root, cgroupPrefix, func(p string) error {
			left, ok, err := cg.load("/" + filepath.Base(p))
			if err != nil || !ok {
				return err
			}
			return cg.remove(left, 5*time.Second)
		}); err != nil {
			log.Warn("could not remove stale cgroups", zap.Error(err))
		}
	}
	if err := stale.Sweep(tempDir, hostRootPrefix, removeHostRoot); err != nil {
		log.Warn("could not remove stale host roots", zap.Error(err))
	}
}

// podInformer watches the node's pods. Its list and watch calls retry every
// retryEvery while they fail, as long as the error is one of a server that
// is away (not 410 Gone or a bad request, which the reflector must handle):
// client-go's own back-off reaches 30 s, jittered to 60, and tests that stop
// the API server (TestAPIServerOutage) measure evictd, not how long a
// stand-in kubelet takes to notice the server is back.
func podInformer(client kubernetes.Interface, node string) cache.SharedIndexInformer {
	onNode := fields.OneTermEqualSelector("spec.nodeName", node).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (kruntime.Object, error) {
			lo.FieldSelector = onNode
			return retrying(ctx, func() (kruntime.Object, error) { return client.CoreV1().Pods("").List(ctx, lo) })
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			lo.FieldSelector = onNode
			return retrying(ctx, func() (watch.Interface, error) { return client.CoreV1().Pods("").Watch(ctx, lo) })
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}, ObjectDescription: "pods"})
}

const retryEvery = 250 * time.Millisecond

func retrying[T any](ctx context.Context, call func() (T, error)) (T, error) {
	for {
		out, err := call()
		if err == nil || ctx.Err() != nil || apierrors.IsGone(err) || apierrors.IsResourceExpired(err) ||
			apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(retryEvery):
		}
	}
}
