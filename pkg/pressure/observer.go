// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v3/common"
	"github.com/shirou/gopsutil/v3/mem"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/fslayout"
)

// Observation is one reading of node and pod pressure.
type Observation struct {
	Time time.Time `json:"time"`
	// Summary is shaped like the kubelet's Summary API. Pods are sorted by UID.
	Summary *statsv1alpha1.Summary `json:"summary"`
	// Pods[i] holds what the Summary has no field for, about Summary.Pods[i].
	Pods []PodExtras `json:"pods"`
	// Node holds node figures the Summary has no field for.
	Node NodeExtras `json:"node"`
	// Layout is where this observation was read from.
	Layout Layout `json:"layout"`

	// SkippedFiles counts files that were malformed or unreadable in this
	// pass, node files included. Pod cgroups that vanished are not counted.
	SkippedFiles int `json:"skippedFiles"`
	// SkippedPods counts pods left out because one of their files was
	// malformed or unreadable.
	SkippedPods int `json:"skippedPods"`
	// VanishedPods counts pod cgroups that were deleted while being read
	// (a pod going away: normal, left out quietly).
	VanishedPods int `json:"vanishedPods"`
	// SignalErrors lists the node-level eviction signals this observation
	// could not measure; each is absent from Summary.
	SignalErrors []SignalError `json:"signalErrors,omitempty"`
	// PodsAge is how old the pods' cgroup figures are: 0 when this pass
	// read them, more when ObserveWith's PodReads let it reuse the last
	// pass's (their MemoryStats carry the time they were read). The
	// ephemeral-storage figures, walked in passes that read the pods, keep
	// their own age (PodExtras.EphemeralAge).
	PodsAge time.Duration `json:"podsAge,omitempty"`
}

// PodExtras are per-pod facts beside the Summary's PodStats.
type PodExtras struct {
	UID string         `json:"uid"`
	QoS v1.PodQOSClass `json:"qos"`
	// Cgroup is the pod's cgroup relative to the hierarchy roots, e.g.
	// /kubepods/burstable/pod<uid>.
	Cgroup string `json:"cgroup"`
	// MemoryEvents are the v2 memory.events counters; nil on v1 and hybrid.
	MemoryEvents *MemoryEvents `json:"memoryEvents,omitempty"`
	// EphemeralAge is how old the pod's ephemeral-storage figure is (it is
	// refreshed every Options.EphemeralRefresh, within a walk budget).
	EphemeralAge time.Duration `json:"ephemeralAge,omitempty"`
	// EphemeralPartial: the walk stopped at the budget, so the figure is a lower bound.
	EphemeralPartial bool `json:"ephemeralPartial,omitempty"`
	// EphemeralParts splits the Summary's ephemeral-storage figure by the
	// parts the kubelet's ranking counts (the total also holds the pod's
	// etc-hosts and stray files in its log directory); nil when there is none.
	EphemeralParts *EphemeralParts `json:"ephemeralParts,omitempty"`
}

// NodeExtras are node facts beside the Summary's NodeStats.
type NodeExtras struct {
	// MemTotalBytes is MemTotal from /proc/meminfo.
	MemTotalBytes uint64 `json:"memTotalBytes"`
	// MemoryCapacityBytes is min(MemTotal, the node cgroup's memory limit)
	// less HugepagePoolBytes (floored at 0): what memory.available is
	// measured against; 0 when that limit or the hugepage pool could not
	// be read (see SignalErrors). Past the floor of memory.available (a
	// working set above it) the Summary's available + working set, the
	// kubelet's capacity, is the working set alone.
	MemoryCapacityBytes uint64 `json:"memoryCapacityBytes"`
	// HugepagePoolBytes is the node's pre-allocated hugepage pool, the sum
	// over page sizes of nr_hugepages × the page size, taken off
	// memory.available and its capacity as the kubelet's
	// HugepageAwareEviction gate does; 0 when there is none, when it is
	// not read (Options.NoHugepageAwareEviction, a node cgroup other than
	// "/") or could not be (see SignalErrors).
	HugepagePoolBytes uint64 `json:"hugepagePoolBytes,omitempty"`
	// NodeCgroupLimitBytes is the node cgroup's memory limit when it is below
	// MemTotal, 0 otherwise (the root cgroup has none).
	NodeCgroupLimitBytes uint64 `json:"nodeCgroupLimitBytes,omitempty"`
	// KubepodsLimitBytes is the kubepods cgroup's memory limit, 0 when unlimited or absent.
	KubepodsLimitBytes uint64 `json:"kubepodsLimitBytes,omitempty"`
	// NodeFsPath, ImageFsPath and ContainerFsPath are the directories whose
	// filesystems the nodefs, imagefs and containerfs figures measure, as
	// seen from the host root.
	NodeFsPath      string `json:"nodeFsPath"`
	ImageFsPath     string `json:"imageFsPath"`
	ContainerFsPath string `json:"containerFsPath"`
	// DiskLayout is which of the three share a filesystem, told by device
	// as the kubelet does; Unknown when one could not be measured.
	DiskLayout fslayout.Layout `json:"diskLayout,omitempty"`
}

// Observer reads node and pod pressure from the kernel. Observe is meant to
// be called from one goroutine (the agent loop); calls are serialized.
// Layout may be called from any goroutine.
type Observer struct {
	opts Options
	log  *zap.Logger
	hier hierarchies
	// memTotal is read once: it changes only with memory hot-plug.
	memTotal uint64
	nodeName string

	mu        sync.Mutex // serializes Observe: the buffers and caches below are shared
	buf       []byte     // file content buffer
	dbuf      []byte     // getdents buffer
	openFiles int
	maxOpen   int

	node     nodeFiles
	kubepods *kubepodsState // nil while there is no kubepods cgroup
	writable writableLayers

	pods    [3]map[string]*podEntry // per QoS directory, keyed by cgroup directory name
	gen     uint64
	active  []*podEntry
	newPods int // pods that appeared in the last pass
	samples []podSample
	// podsRead is the last read of the pods' cgroups, which a pass that
	// does not read them reuses (ObserveWith).
	podsRead struct {
		n    int // o.samples[:n] were read whole
		at   time.Time
		from *kubepodsState // reused only while this kubepods stays
	}
	logs  logIndex
	stale []*podEntry
	// remeasure: pods whose ephemeral storage is walked at every pass,
	// whatever the age of their figure (RemeasureEphemeral).
	remeasure map[string]bool

	layoutMu sync.Mutex
	layout   Layout

	// trace, when set (benchmarks), sees every file and directory a pass reads.
	trace func(p cpath, dir bool)
}

// NewObserver checks the host root, detects the cgroup mode and the
// kubelet's cgroup driver, and returns an Observer. An error wrapping
// ErrHostRoot means the host root lacks what evictd needs; ErrInvalidOptions
// means an option is malformed.
func NewObserver(opts Options, log *zap.Logger) (*Observer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if !isDir(opts.HostRoot) {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrHostRoot, opts.HostRoot)
	}
	memTotal, err := readMemTotal(opts.HostRoot)
	if err != nil {
		return nil, err
	}
	hier, err := detectHierarchies(opts.HostRoot)
	if err != nil {
		return nil, err
	}
	rootDir := filepath.Join(hier.memory, opts.CgroupRoot)
	if !isDir(rootDir) {
		return nil, fmt.Errorf("%w: cgroup root %q not found in the memory hierarchy (%s is not a directory)", ErrHostRoot, opts.CgroupRoot, rootDir)
	}
	nodeDir := filepath.Join(hier.memory, opts.NodeCgroup)
	if !isDir(nodeDir) {
		return nil, fmt.Errorf("%w: node cgroup %q not found in the memory hierarchy (%s is not a directory)", ErrHostRoot, opts.NodeCgroup, nodeDir)
	}
	o := &Observer{
		opts:     opts,
		log:      log,
		hier:     hier,
		memTotal: memTotal,
		buf:      make([]byte, 16<<10),
		dbuf:     make([]byte, 32<<10),
		maxOpen:  openFileBudget(opts.MaxOpenFiles),
		logs:     logIndex{dir: newCPath(filepath.Join(opts.HostRoot, "var/log/pods"))},
	}
	for i := range o.pods {
		o.pods[i] = map[string]*podEntry{}
	}
	o.nodeName = readHostname(opts.HostRoot)
	o.node = newNodeFiles(opts, hier, rootDir, nodeDir)
	o.node.hugepages = newHugepagePool(opts, log)
	o.writable = writableLayers{hostRoot: opts.HostRoot, mountinfo: filepath.Join(opts.HostRoot, "proc/1/mountinfo"), upper: map[string]string{},
		crioStore: filepath.Join(opts.HostRoot, opts.ContainerFsPath)}
	o.layout = Layout{
		Mode:          hier.mode,
		CgroupRoot:    opts.CgroupRoot,
		NodeCgroup:    opts.NodeCgroup,
		MemoryMount:   hier.memory,
		UnifiedMount:  hier.unified,
		PidsMount:     hier.pids,
		NodeMemoryDir: nodeDir,
	}
	if o.node.mem.pressure.path != nil {
		// Node PSI comes from /proc/pressure; the node cgroup's own file is
		// for the wake-up sources.
		o.layout.NodePressureDir = filepath.Dir(o.node.mem.pressure.path.String())
	}
	if o.node.procPressure {
		o.layout.ProcPressureDir = filepath.Join(opts.HostRoot, "proc/pressure")
	}
	if err := o.findKubepods(); err != nil {
		return nil, fmt.Errorf("%w: listing %s: %v", ErrHostRoot, rootDir, err)
	}
	log.Debug("observer ready", zap.String("mode", string(hier.mode)), zap.String("driver", string(o.layout.Driver)),
		zap.String("cgroupRootDir", rootDir), zap.String("nodeMemoryDir", nodeDir), zap.String("kubepods", o.layout.KubepodsMemoryDir))
	return o, nil
}

// readMemTotal uses gopsutil, pointed at the host's /proc through its context
// environment: MemTotal is read once, so its allocations do not matter, and
// gopsutil already copes with the corner cases of /proc/meminfo.
func readMemTotal(hostRoot string) (uint64, error) {
	vm, err := mem.VirtualMemoryWithContext(hostProcContext(hostRoot))
	if err != nil {
		return 0, fmt.Errorf("%w: reading %s: %v", ErrHostRoot, filepath.Join(hostRoot, "proc/meminfo"), err)
	}
	if vm.Total == 0 {
		return 0, fmt.Errorf("%w: no MemTotal in %s", ErrHostRoot, filepath.Join(hostRoot, "proc/meminfo"))
	}
	return vm.Total, nil
}

func hostProcContext(hostRoot string) context.Context {
	return context.WithValue(context.Background(), common.EnvKey,
		common.EnvMap{common.HostProcEnvKey: filepath.Join(hostRoot, "proc")})
}

func readHostname(hostRoot string) string {
	b, err := os.ReadFile(filepath.Join(hostRoot, "proc/sys/kernel/hostname"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// openFileBudget turns Options.MaxOpenFiles into a count.
func openFileBudget(max int) int {
	if max < 0 {
		return 0
	}
	if max > 0 {
		return max
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 4096
	}
	return int(rl.Cur / 2)
}

// Layout returns where the observer reads from. The kubepods fields fill in
// once the kubelet has created its cgroups.
func (o *Observer) Layout() Layout {
	o.layoutMu.Lock()
	defer o.layoutMu.Unlock()
	return o.layout
}

// Close releases the files the observer keeps open between passes.
func (o *Observer) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closeKept()
	for _, m := range o.pods {
		clear(m)
	}
	return nil
}

// closeKept closes every file kept open; they reopen on their next read.
func (o *Observer) closeKept() {
	for _, m := range o.pods {
		for _, e := range m {
			e.close(&o.openFiles)
		}
	}
	if o.kubepods != nil {
		o.kubepods.mem.close(&o.openFiles)
	}
	o.node.close(&o.openFiles)
}

// keep tells whether one more file may stay open between passes.
func (o *Observer) keep() bool { return o.openFiles < o.maxOpen }

// read reads one file for this pass.
func (o *Observer) read(f *file) ([]byte, error) {
	if o.trace != nil {
		o.trace(f.path, false)
	}
	keep := o.keep()
	b, err := f.read(o.buf, keep, &o.openFiles)
	if keep && (err == unix.EMFILE || err == unix.ENFILE) {
		// The process is out of descriptors: give back every kept file, keep
		// at most half as many from now on, and read this one the slow way.
		held := o.openFiles
		o.closeKept()
		o.maxOpen = held / 2
		o.log.Warn("out of file descriptors; keeping fewer kernel files open between passes",
			zap.Int("held", held), zap.Int("budget", o.maxOpen), zap.Error(err))
		b, err = f.read(o.buf, false, &o.openFiles)
	}
	return b, err
}

// Observe takes one observation. Problems with single pod files are logged,
// counted in the Observation and skipped. A node-level file a signal needs
// that is unreadable or malformed leaves that signal out of the Summary and
// is listed in SignalErrors (and logged at most once a minute per cause).
// Observe fails, with no observation, when the context is cancelled and
// when there is no kubepods cgroup (ErrNoKubepods): without it the pods'
// usage is unknown, and a list of no pods would be a lie. It looks for
// kubepods again on every call.
func (o *Observer) Observe(ctx context.Context) (*Observation, error) {
	return o.ObserveWith(ctx, nil)
}

// PodReads decides, once a pass has read the node, whether it reads the
// pods' cgroups too. node is the pass's observation so far: its Summary
// holds the node's figures and no pods yet. last is when the pods were last
// read. Reading the pods is most of a pass's cost at a hundred pods, and
// away from every threshold nothing ranks them.
type PodReads func(node *Observation, last time.Time) bool

// ObserveWith is Observe, except that a pass reads the pods' cgroups only
// when reads (nil: always) says so, and otherwise carries the pods as the
// last read found them (Observation.PodsAge). The pods are read all the
// same on the first pass, after a pass that could not list them, after the
// kubepods cgroup was found again, and while its own files cannot be read.
func (o *Observer) ObserveWith(ctx context.Context, reads PodReads) (*Observation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.opts.Clock.Now()
	obs := &Observation{Time: now}
	var ns nodeSample
	o.readNode(&ns, obs)
	if o.kubepods == nil {
		if err := o.findKubepods(); err != nil || o.kubepods == nil {
			return nil, o.noKubepodsErr(err)
		}
	}
	k := o.kubepods
	o.readKubepods(&ns, obs)
	ts := metav1.NewTime(now)
	sum := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: o.nodeName}}
	o.buildNode(&sum.Node, obs, &ns, ts)
	last := &o.podsRead
	// A kubepods that cannot be read may be one the kubelet took away:
	// listing the pods tells, as it did before reuse.
	read := reads == nil || last.from != k || !ns.kubepods.ok || reads(&Observation{Time: now, Summary: sum, Node: obs.Node, SignalErrors: obs.SignalErrors}, last.at)
	if read {
		n, listed := o.readPods(obs, ns.swapOn())
		last.n, last.at, last.from = n, now, k
		if !listed {
			last.from = nil // a pass that could not list the pods is not one to reuse
		}
		if o.kubepods == nil {
			return nil, o.kubepodsGoneErr(k.dir.String())
		}
	} else {
		o.newPods = 0
		obs.PodsAge = now.Sub(last.at)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.signalsRecovered(obs)
	n := last.n
	// The names and the ephemeral-storage walks wait for a pass that reads
	// the pods too, so that a pass that reuses carries the last read's pods
	// whole, as they were but older (PodExtras.EphemeralAge): what the
	// trace leaves out of such a pass is then exactly what it gives back.
	// A walk is at most one read later for it, and every pass near a
	// threshold reads.
	if n > 0 && read {
		o.refreshNames(now)
		o.refreshEphemeral(ctx, now)
	}
	obs.Summary = sum
	o.buildPods(obs, o.samples[:n], metav1.NewTime(last.at), now)
	obs.Layout = o.Layout()
	return obs, nil
}

// buildPods turns the pods' samples into the Summary's pods, their figures
// stamped read. The pointer fields of the kubelet types point into a few
// slabs allocated per observation, so the whole Summary costs a handful of
// allocations whatever the pod count.
func (o *Observer) buildPods(obs *Observation, samples []podSample, ts metav1.Time, now time.Time) {
	sum := obs.Summary
	n := len(samples)
	if n == 0 {
		sum.Pods = []statsv1alpha1.PodStats{}
		obs.Pods = []PodExtras{}
		return
	}
	const perPod = 10
	vals := make([]uint64, n*perPod)
	pods := make([]statsv1alpha1.PodStats, n)
	mems := make([]statsv1alpha1.MemoryStats, n)
	procs := make([]statsv1alpha1.ProcessStats, n)
	extras := make([]PodExtras, n)
	var psis []statsv1alpha1.PSIStats
	var events []MemoryEvents
	var fss []statsv1alpha1.FsStats
	var parts []EphemeralParts
	var swaps []statsv1alpha1.SwapStats
	for i := range samples {
		s := &samples[i]
		e := s.e
		v := vals[i*perPod : (i+1)*perPod : (i+1)*perPod]
		v[0], v[1], v[2], v[3], v[4] = workingSet(s.usage, s.stat.InactiveFile), s.usage, s.stat.RSS, s.stat.PgFault, s.stat.PgMajFault
		m := &mems[i]
		*m = statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: &v[0], UsageBytes: &v[1], RSSBytes: &v[2], PageFaults: &v[3], MajorPageFaults: &v[4]}
		if s.hasPSI {
			if psis == nil {
				psis = make([]statsv1alpha1.PSIStats, n)
			}
			psis[i] = s.psi
			m.PSI = &psis[i]
		}
		p := &pods[i]
		p.PodRef = statsv1alpha1.PodReference{Name: e.name, Namespace: e.namespace, UID: e.uid}
		p.Containers = []statsv1alpha1.ContainerStats{}
		p.Memory = m
		if s.hasPids {
			v[5] = s.pids
			procs[i].ProcessCount = &v[5]
			p.ProcessStats = &procs[i]
		}
		if s.swap.ok {
			if swaps == nil {
				swaps = make([]statsv1alpha1.SwapStats, n)
			}
			swapStats(&swaps[i], ts, &s.swap, v[8:10])
			p.Swap = &swaps[i]
		}
		x := &extras[i]
		*x = PodExtras{UID: e.uid, QoS: e.qos, Cgroup: e.rel}
		if s.hasEvents {
			if events == nil {
				events = make([]MemoryEvents, n)
			}
			events[i] = s.events
			x.MemoryEvents = &events[i]
		}
		if e.eph.known {
			if fss == nil {
				fss = make([]statsv1alpha1.FsStats, n)
			}
			v[6], v[7] = e.eph.used, e.eph.inodes
			fss[i] = statsv1alpha1.FsStats{Time: metav1.NewTime(e.eph.at), UsedBytes: &v[6], InodesUsed: &v[7]}
			p.EphemeralStorage = &fss[i]
			x.EphemeralAge = now.Sub(e.eph.at)
			x.EphemeralPartial = e.eph.partial
			if parts == nil {
				parts = make([]EphemeralParts, n)
			}
			parts[i] = e.eph.parts
			x.EphemeralParts = &parts[i]
		}
	}
	sum.Pods = pods
	obs.Pods = extras
}

// workingSet is the kubelet's (cAdvisor's) working set: usage minus
// inactive file pages, floored at zero.
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}

// quoteContent renders file content for a warning. Long content is cut to
// the part that shows the problem: the first line that is not "key value",
// else the end of the file, where a truncated read shows.
func quoteContent(b []byte) string {
	const max = 160
	if len(b) <= max {
		return fmt.Sprintf("%q", b)
	}
	for i, line := range bytes.Split(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{' '})
		if _, err := atou(v); (!ok || len(k) == 0 || err != nil) && len(line) > 0 {
			if len(line) > max {
				line = line[:max]
			}
			return fmt.Sprintf("line %d: %q", i+1, line)
		}
	}
	return fmt.Sprintf("...%q", b[len(b)-max:])
}
