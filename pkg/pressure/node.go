// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/shirou/gopsutil/v3/mem"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/fslayout"
)

// memFiles are the memory files of one cgroup (the node or kubepods).
type memFiles struct {
	v2       bool
	usage    file // memory.usage_in_bytes (v1) or memory.current (v2); no path on the v2 root
	stat     file
	limit    file // memory.limit_in_bytes (v1) or memory.max (v2); no path on the v2 root
	pressure file // cgroup2 memory.pressure; no path when there is none
	// swap and swapMax are the cgroup's swap files (see swapFiles); no
	// path when the kernel has none or swap is not read for the cgroup.
	swap, swapMax file
}

// newMemFiles sets up the memory files of the cgroup whose memory directory
// is dir. pressureDir is its cgroup2 directory ("" when none). v2Root tells
// that dir is the root of a v2 hierarchy, which has no memory.current or
// memory.max. swap asks for its swap files too.
func newMemFiles(mode Mode, dir, pressureDir string, v2Root, swap bool) memFiles {
	m := memFiles{v2: mode == ModeV2, usage: file{fd: -1}, limit: file{fd: -1}, pressure: file{fd: -1}, swap: file{fd: -1}, swapMax: file{fd: -1}}
	m.stat = newFile(filepath.Join(dir, "memory.stat"))
	if m.v2 {
		if !v2Root {
			m.usage = newFile(filepath.Join(dir, "memory.current"))
			m.limit = newFile(filepath.Join(dir, "memory.max"))
		}
	} else {
		m.usage = newFile(filepath.Join(dir, "memory.usage_in_bytes"))
		m.limit = newFile(filepath.Join(dir, "memory.limit_in_bytes"))
	}
	if pressureDir != "" {
		if p := filepath.Join(pressureDir, "memory.pressure"); existsC(newCPath(p)) {
			m.pressure = newFile(p)
		}
	}
	if swap {
		m.swap, m.swapMax = swapFiles(m.v2, dir)
	}
	return m
}

// swapFiles returns the swap files of the memory cgroup dir: on v2
// memory.swap.current and memory.swap.max, on v1 memory.memsw.usage_in_bytes
// (memory and swap together; no limit is read). A file the kernel does not
// have (built without swap, or swap accounting off: cgroup.memory=noswap,
// swapaccount=0) has no path, and the cgroup then has no swap figure. It
// is checked once, so a pass does not pay for failed opens.
func swapFiles(v2 bool, dir string) (usage, max file) {
	usage, max = file{fd: -1}, file{fd: -1}
	name := "memory.memsw.usage_in_bytes"
	if v2 {
		name = "memory.swap.current"
	}
	if p := newCPath(filepath.Join(dir, name)); existsC(p) {
		usage.path = p
	}
	if v2 && usage.path != nil {
		if p := newCPath(filepath.Join(dir, "memory.swap.max")); existsC(p) {
			max.path = p
		}
	}
	return usage, max
}

func (m *memFiles) close(open *int) {
	m.usage.close(open)
	m.stat.close(open)
	m.limit.close(open)
	m.pressure.close(open)
	m.swap.close(open)
	m.swapMax.close(open)
}

// pressureDirFor is the cgroup2 directory of a cgroup given relative to the
// hierarchy roots: the same directory on v2, the one under the unified mount
// on hybrid hosts when the kubelet created it there, "" otherwise.
func pressureDirFor(h hierarchies, rel string) string {
	if h.unified == "" {
		return ""
	}
	d := filepath.Join(h.unified, rel)
	if !isDir(d) {
		return ""
	}
	return d
}

// nodeFiles are the node-level files read every pass.
type nodeFiles struct {
	rootDir      string   // memory cgroup of the cgroup root, where kubepods is
	mem          memFiles // the node cgroup's
	procPressure bool
	psi          [3]file // /proc/pressure/memory, cpu, io
	meminfo      file    // /proc/meminfo, for SwapTotal and SwapFree (and Hugetlb, see hugepages)
	hugepages    hugepagePool
	pidMax       file
	threadsMax   file
	loadavg      file
	nodefs       string // <root>/var/lib/kubelet
	imagefs      string // <root><image fs path>
	containerfs  string // <root><container fs path>
	hostRoot     string
	// warned remembers which node PSI files already got a warning, so a
	// broken file is reported once, not on every pass.
	warned map[string]bool
	// signalWarned is when each lost signal was last logged, by file and
	// cause; signalLost holds the signals lost since they last read well.
	signalWarned map[signalWarnKey]time.Time
	signalLost   map[string]bool
	// layoutWarned: the disk layout was found unknown and said so.
	layoutWarned bool
	layoutCache  layoutCache
}

// newNodeFiles sets up the node-level files. rootDir is the memory cgroup of
// the cgroup root (kubepods' parent), nodeDir that of the node cgroup, whose
// working set is the node's: the kubelet takes node memory from the root
// cgroup "/" (summaryProviderImpl.Get asks for GetCgroupStats("/")) whatever
// its --cgroup-root, which only places kubepods.
func newNodeFiles(opts Options, h hierarchies, rootDir, nodeDir string) nodeFiles {
	n := nodeFiles{
		rootDir:     rootDir,
		mem:         newMemFiles(h.mode, nodeDir, pressureDirFor(h, opts.NodeCgroup), h.mode == ModeV2 && opts.NodeCgroup == "/", false),
		meminfo:     newFile(filepath.Join(opts.HostRoot, "proc/meminfo")),
		pidMax:      newFile(filepath.Join(opts.HostRoot, "proc/sys/kernel/pid_max")),
		threadsMax:  newFile(filepath.Join(opts.HostRoot, "proc/sys/kernel/threads-max")),
		loadavg:     newFile(filepath.Join(opts.HostRoot, "proc/loadavg")),
		nodefs:      filepath.Join(opts.HostRoot, "var/lib/kubelet"),
		imagefs:     filepath.Join(opts.HostRoot, opts.ImageFsPath),
		containerfs: filepath.Join(opts.HostRoot, opts.ContainerFsPath),
		hostRoot:    opts.HostRoot,
		warned:      map[string]bool{},

		signalWarned: map[signalWarnKey]time.Time{},
		signalLost:   map[string]bool{},
	}
	pp := filepath.Join(opts.HostRoot, "proc/pressure")
	n.procPressure = isDir(pp)
	for i, r := range [...]string{"memory", "cpu", "io"} {
		n.psi[i] = newFile(filepath.Join(pp, r))
	}
	return n
}

func (n *nodeFiles) close(open *int) {
	n.mem.close(open)
	for i := range n.psi {
		n.psi[i].close(open)
	}
	n.meminfo.close(open)
	n.hugepages.close(open)
	n.pidMax.close(open)
	n.threadsMax.close(open)
	n.loadavg.close(open)
}

// memSample is what one pass read from a cgroup's memFiles.
type memSample struct {
	ok      bool // usage, stat and limit all read
	limitOK bool // the limit was read (or the cgroup has no limit file)
	usage   uint64
	limit   uint64 // unlimited when none
	stat    memStat
	psi     statsv1alpha1.PSIStats
	hasPSI  bool
	swap    swapSample
}

// swapSample is a cgroup's swap figures in one pass.
type swapSample struct {
	ok      bool // usage was read
	availOK bool // the cgroup has a swap limit (v2 memory.swap.max not "max")
	usage   uint64
	avail   uint64 // limit − usage, floored at 0
}

// nodeSample is what one pass read at node level.
type nodeSample struct {
	mem      memSample
	kubepods memSample
	psi      [3]statsv1alpha1.PSIStats
	psiOK    [3]bool
	fs       fsSample
	imagefs  fsSample
	// containerfs is imagefs's sample when both paths are one.
	containerfs fsSample
	pidMax      uint64
	tasks       uint64
	pidsOK      bool
	// swapTotal and swapFree are /proc/meminfo's, in bytes; swapOK: read.
	swapTotal, swapFree uint64
	swapOK              bool
	// hugepages is the node's hugepage pool in bytes, taken off
	// memory.available; hugepagesOK: known (0 when not read: switched off).
	hugepages   uint64
	hugepagesOK bool
}

type fsSample struct {
	ok                                            bool
	dev                                           uint64
	capacity, available, used, inodes, inodesFree uint64
}

// nodeWarn reports a broken node-level file, once until it reads well again.
func (o *Observer) nodeWarn(obs *Observation, f *file, content []byte, err error) {
	o.nodeWarnPath(obs, f.path.String(), content, err)
}

func (o *Observer) nodeWarnPath(obs *Observation, key string, content []byte, err error) {
	obs.SkippedFiles++
	if o.node.warned[key] {
		o.log.Debug("node file still unusable", zap.String("file", key), zap.Error(err))
		return
	}
	o.node.warned[key] = true
	fields := []zap.Field{zap.String("file", key), zap.Error(err)}
	if content != nil {
		fields = append(fields, zap.String("content", quoteContent(content)))
	}
	o.log.Warn("skipping unusable node file", fields...)
}

func (o *Observer) nodeOK(f *file) {
	if len(o.node.warned) > 0 {
		delete(o.node.warned, f.path.String())
	}
}

// swapOn tells whether this pass reads the cgroups' swap files: when the
// node has swap, or when /proc/meminfo could not tell. Without swap every
// cgroup's figure is 0, and a file more per pod is not worth reading for
// it (see BenchmarkPodMemoryRead).
func (ns *nodeSample) swapOn() bool { return !ns.swapOK || ns.swapTotal > 0 }

// readSignalFile reads and parses a single-value node-level file that the
// given signals need.
func (o *Observer) readSignalFile(obs *Observation, f *file, parse func([]byte) (uint64, error), signals ...string) (uint64, bool) {
	b, err := o.read(f)
	if err != nil {
		o.signalFileErr(obs, f.path.String(), nil, err, signals...)
		return 0, false
	}
	v, err := parse(b)
	if err != nil {
		o.signalFileErr(obs, f.path.String(), b, err, signals...)
		return 0, false
	}
	return v, true
}

// readMem reads a cgroup's memory figures. usageSignals are the signals
// that need its usage and memory.stat, limitSignals those that need its
// limit. On the v2 root there is no memory.current and no memory.max: usage
// is emulated as anon + file from memory.stat (what runc and cAdvisor do), or
// from /proc/meminfo on kernels without a root memory.stat. swap asks for
// its swap files, when it has them.
func (o *Observer) readMem(obs *Observation, m *memFiles, s *memSample, pressure, swap bool, usageSignals, limitSignals []string) {
	s.limit, s.limitOK = unlimited, true
	if m.limit.path != nil {
		if s.limit, s.limitOK = o.readSignalFile(obs, &m.limit, parseLimit, limitSignals...); !s.limitOK {
			s.limit = unlimited
		}
	}
	b, err := o.read(&m.stat)
	if err != nil {
		if m.v2 && m.usage.path == nil && errors.Is(err, unix.ENOENT) {
			o.readMeminfoUsage(obs, s, usageSignals)
			return
		}
		o.signalFileErr(obs, m.stat.path.String(), nil, err, usageSignals...)
		return
	}
	st, err := parseMemoryStat(b, m.v2)
	if err != nil {
		o.signalFileErr(obs, m.stat.path.String(), b, err, usageSignals...)
		return
	}
	s.stat = st
	if m.usage.path == nil {
		s.usage = st.RSS + st.File
	} else {
		var ok bool
		if s.usage, ok = o.readSignalFile(obs, &m.usage, parseUint, usageSignals...); !ok {
			return
		}
	}
	if swap && m.swap.path != nil {
		s.swap = o.readCgroupSwap(obs, m, s.usage)
	}
	s.ok = s.limitOK
	if s.ok && pressure && m.pressure.path != nil {
		s.psi, s.hasPSI = o.readPSIFile(obs, &m.pressure)
	}
}

// readMeminfoUsage is the slow path for a v2 root cgroup without memory.stat
// (kernels before root memory.stat existed): gopsutil parses /proc/meminfo.
func (o *Observer) readMeminfoUsage(obs *Observation, s *memSample, signals []string) {
	ctx := hostProcContext(o.opts.HostRoot)
	meminfo := filepath.Join(o.opts.HostRoot, "proc/meminfo")
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		o.signalFileErr(obs, meminfo, nil, err, signals...)
		return
	}
	ex, err := mem.VirtualMemoryExWithContext(ctx)
	if err != nil {
		o.signalFileErr(obs, meminfo, nil, err, signals...)
		return
	}
	s.usage = vm.Total - vm.Free
	s.stat = memStat{InactiveFile: ex.InactiveFile}
	s.ok = s.limitOK
}

// readCgroupSwap reads the swap files of kubepods. No signal needs them: a
// broken one drops the figure with a warning (nodeWarn). usage is the
// cgroup's memory usage, which v1's memsw figure includes.
func (o *Observer) readCgroupSwap(obs *Observation, m *memFiles, usage uint64) swapSample {
	var s swapSample
	v, ok := o.readNodeFile(obs, &m.swap, parseUint)
	if !ok {
		return s
	}
	if !m.v2 {
		v = sub0(v, usage)
	}
	if m.swapMax.path != nil {
		limit, ok := o.readNodeFile(obs, &m.swapMax, parseLimit)
		if !ok {
			return s
		}
		if limit != unlimited {
			s.avail, s.availOK = sub0(limit, v), true
		}
	}
	s.usage, s.ok = v, true
	return s
}

// readNodeFile reads and parses a single-value node-level file that no
// signal needs: a broken one is warned about once (nodeWarn).
func (o *Observer) readNodeFile(obs *Observation, f *file, parse func([]byte) (uint64, error)) (uint64, bool) {
	b, err := o.read(f)
	if err != nil {
		o.nodeWarn(obs, f, nil, err)
		return 0, false
	}
	v, err := parse(b)
	if err != nil {
		o.nodeWarn(obs, f, b, err)
		return 0, false
	}
	o.nodeOK(f)
	return v, true
}

// readMeminfo reads SwapTotal and SwapFree from /proc/meminfo, for
// swap.available, and, when the hugepage pool comes from there (see
// hugepagePool), its Hugetlb line, for memory.available. The warning of a
// malformed file quotes the bad line; a bad line of one part does not
// cost the other.
func (o *Observer) readMeminfo(obs *Observation, ns *nodeSample) {
	f := &o.node.meminfo
	hugepages := o.node.hugepages.meminfo && !o.node.hugepages.off
	b, err := o.read(f)
	if err != nil {
		signals := swapSignals
		if hugepages {
			signals = []string{sigSwap, sigMemory}
		}
		o.signalFileErr(obs, f.path.String(), nil, err, signals...)
		return
	}
	skipped := obs.SkippedFiles
	total, free, line, err := parseMeminfoSwap(b)
	if err != nil {
		o.signalFileErr(obs, f.path.String(), line, err, swapSignals...)
	} else {
		ns.swapTotal, ns.swapFree, ns.swapOK = total, free, true
	}
	if hugepages {
		pool, line, err := parseMeminfoHugetlb(b)
		if err != nil {
			if line != nil {
				err = fmt.Errorf("%s: %w", quoteContent(line), err) // the value, in the SignalError itself
			}
			o.signalFileErr(obs, f.path.String(), line, err, nodeUsageSignals...)
			obs.SkippedFiles = min(obs.SkippedFiles, skipped+1) // one file, however many of its lines failed
			return
		}
		ns.hugepages, ns.hugepagesOK = pool, true
	}
}

func (o *Observer) readPSIFile(obs *Observation, f *file) (statsv1alpha1.PSIStats, bool) {
	b, err := o.read(f)
	if err != nil {
		// EOPNOTSUPP: PSI switched off at boot (psi=0) or for the cgroup.
		if !errors.Is(err, unix.EOPNOTSUPP) {
			o.nodeWarn(obs, f, nil, err)
		}
		return statsv1alpha1.PSIStats{}, false
	}
	p, err := parsePSI(b)
	if err != nil {
		o.nodeWarn(obs, f, b, err)
		return p, false
	}
	o.nodeOK(f)
	return p, true
}

// The kubelet's names of the node signals, as pkg/thresholds spells them.
const (
	sigMemory      = "memory.available"
	sigAllocatable = "allocatableMemory.available"
	sigNodeFs      = "nodefs.available"
	sigNodeInodes  = "nodefs.inodesFree"
	sigImageFs     = "imagefs.available"
	sigImageInodes = "imagefs.inodesFree"
	// containerfs has no thresholds of its own (the kubelet applies those
	// of the filesystem it is on), but its figures can go missing too.
	sigContainerFs     = "containerfs.available"
	sigContainerInodes = "containerfs.inodesFree"
	sigPID             = "pid.available"
	sigSwap            = "swap.available"
)

// The signals each node-level file feeds. The node's memory limit is its
// capacity, which allocatableMemory.available is capped by too.
var (
	nodeUsageSignals   = []string{sigMemory}
	nodeLimitSignals   = []string{sigMemory, sigAllocatable}
	kubepodsSignals    = []string{sigAllocatable}
	nodeFsSignals      = []string{sigNodeFs, sigNodeInodes}
	imageFsSignals     = []string{sigImageFs, sigImageInodes}
	containerFsSignals = []string{sigContainerFs, sigContainerInodes}
	pidSignals         = []string{sigPID}
	swapSignals        = []string{sigSwap}
)

func (o *Observer) readNode(ns *nodeSample, obs *Observation) {
	n := &o.node
	o.readMem(obs, &n.mem, &ns.mem, false, false, nodeUsageSignals, nodeLimitSignals)
	o.readMeminfo(obs, ns)
	o.readHugepages(obs, ns)
	if n.procPressure && !o.opts.NoNodePSI {
		for i := range n.psi {
			ns.psi[i], ns.psiOK[i] = o.readPSIFile(obs, &n.psi[i])
		}
	}
	pidMax, ok1 := o.readSignalFile(obs, &n.pidMax, parseUint, pidSignals...)
	threadsMax, ok2 := o.readSignalFile(obs, &n.threadsMax, parseUint, pidSignals...)
	tasks, ok3 := o.readSignalFile(obs, &n.loadavg, parseLoadavgTasks, pidSignals...)
	if ok1 && ok2 && ok3 {
		ns.pidMax, ns.tasks, ns.pidsOK = min(pidMax, threadsMax), tasks, true
	}
	ns.fs = o.statfs(obs, n.nodefs, nodeFsSignals)
	ns.imagefs = o.statfs(obs, n.imagefs, imageFsSignals)
	ns.containerfs = ns.imagefs
	if n.containerfs != n.imagefs {
		ns.containerfs = o.statfs(obs, n.containerfs, containerFsSignals)
	}
}

// statfs measures the filesystem holding p, which signals need. p must
// exist: a missing directory means the filesystem is not mounted into
// evictd's host root (a DaemonSet without the mount, a runtime elsewhere),
// and measuring whatever holds its parent would be a guess.
func (o *Observer) statfs(obs *Observation, p string, signals []string) fsSample {
	var st unix.Statfs_t
	var fi unix.Stat_t
	err := unix.Statfs(p, &st)
	if err == nil {
		// The device tells whether two paths share a filesystem: statfs's
		// fsid is zero on some filesystems.
		err = unix.Stat(p, &fi)
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			err = fmt.Errorf("statfs: %w (not in evictd's host root: mount it, or point evictd at it)", err)
		} else {
			err = fmt.Errorf("statfs: %w", err)
		}
		o.signalFileErr(obs, p, nil, err, signals...)
		return fsSample{}
	}
	bs := uint64(st.Bsize)
	return fsSample{
		ok:         true,
		dev:        fi.Dev,
		capacity:   st.Blocks * bs,
		available:  st.Bavail * bs,
		used:       (st.Blocks - st.Bfree) * bs,
		inodes:     st.Files,
		inodesFree: st.Ffree,
	}
}

// warnLayoutOnce says, once, that the writable layers are on a filesystem
// of their own, apart from nodefs and imagefs: a layout the kubelet does not
// have, which evictd ranks as if on one filesystem.
func (o *Observer) warnLayoutOnce(n NodeExtras) {
	if o.node.layoutWarned {
		return
	}
	o.node.layoutWarned = true
	o.log.Warn("the containers' writable layers are on neither nodefs's nor imagefs's filesystem, a layout the kubelet does not support; disk pressure is ranked as if on one filesystem",
		zap.String("nodefs", n.NodeFsPath), zap.String("imagefs", n.ImageFsPath), zap.String("containerfs", n.ContainerFsPath))
}

// kubepodsState is the kubepods cgroup once found.
type kubepodsState struct {
	name       string // directory name, e.g. kubepods.slice
	rel        string // relative to the hierarchy roots
	driver     Driver
	prefix     []byte // systemd child name prefix
	dir        cpath  // memory directory
	burstable  string // QoS directory names inside it
	besteffort string
	// burstableDir and besteffortDir are their memory directories.
	burstableDir, besteffortDir cpath
	mem                         memFiles
}

// findKubepods looks for the kubepods cgroup and records it in the layout.
func (o *Observer) findKubepods() error {
	name, driver, err := findKubepods(o.node.rootDir)
	if err != nil || name == "" {
		return err
	}
	rel := filepath.Join(o.opts.CgroupRoot, name)
	dir := filepath.Join(o.hier.memory, rel)
	k := &kubepodsState{name: name, rel: rel, driver: driver, dir: newCPath(dir)}
	if driver == DriverSystemd {
		k.prefix = systemdPrefix(name)
		k.burstable = string(k.prefix) + "-burstable.slice"
		k.besteffort = string(k.prefix) + "-besteffort.slice"
	} else {
		k.burstable, k.besteffort = "burstable", "besteffort"
	}
	k.burstableDir = newCPath(filepath.Join(dir, k.burstable))
	k.besteffortDir = newCPath(filepath.Join(dir, k.besteffort))
	pdir := pressureDirFor(o.hier, rel)
	k.mem = newMemFiles(o.hier.mode, dir, pdir, false, true)
	o.kubepods = k
	o.layoutMu.Lock()
	o.layout.Driver = driver
	o.layout.KubepodsCgroup = rel
	o.layout.KubepodsMemoryDir = dir
	if k.mem.pressure.path != nil {
		o.layout.KubepodsPressureDir = pdir
	}
	o.layoutMu.Unlock()
	o.log.Info("found the kubepods cgroup", zap.String("dir", dir), zap.String("driver", string(driver)))
	return nil
}

// dropKubepods forgets a kubepods cgroup that went away (kubelet reset).
func (o *Observer) dropKubepods() {
	o.kubepods.mem.close(&o.openFiles)
	o.kubepods = nil
	o.layoutMu.Lock()
	o.layout.Driver, o.layout.KubepodsCgroup, o.layout.KubepodsMemoryDir, o.layout.KubepodsPressureDir = DriverNone, "", "", ""
	o.layoutMu.Unlock()
	o.log.Warn("the kubepods cgroup is gone", zap.String("dir", o.node.rootDir))
}

func (o *Observer) readKubepods(ns *nodeSample, obs *Observation) {
	o.readMem(obs, &o.kubepods.mem, &ns.kubepods, !o.opts.NoNodePSI, ns.swapOn(), kubepodsSignals, kubepodsSignals)
}

// buildNode fills NodeStats from the node sample. A signal whose files
// could not be read is left out (its SignalError says why), never guessed.
func (o *Observer) buildNode(node *statsv1alpha1.NodeStats, obs *Observation, ns *nodeSample, ts metav1.Time) {
	capacity := o.memTotal
	if ns.mem.limitOK && ns.mem.limit < capacity {
		capacity = ns.mem.limit
		obs.Node.NodeCgroupLimitBytes = ns.mem.limit
	}
	obs.Node.MemTotalBytes = o.memTotal
	// The hugepage pool comes off memory.available, floored at 0, as the
	// kubelet's adjustForHugePages does; the working set is left as it is,
	// so the capacity (available + working set) drops by the pool too.
	if ns.hugepagesOK {
		obs.Node.HugepagePoolBytes = ns.hugepages
		if ns.mem.limitOK {
			obs.Node.MemoryCapacityBytes = sub0(capacity, ns.hugepages)
		}
	}

	var psi []statsv1alpha1.PSIStats
	for i := range ns.psiOK {
		if ns.psiOK[i] {
			psi = ns.psi[:]
		}
	}
	// 6 node memory values, 3 kubepods, 5 + 5 + 5 filesystem values, 2 + 2 swap.
	vals := make([]uint64, 28)
	// The node's and kubepods' swap, when there is any.
	var swaps *[2]statsv1alpha1.SwapStats
	if (ns.swapOK && ns.swapTotal > 0) || ns.kubepods.swap.ok {
		swaps = new([2]statsv1alpha1.SwapStats)
	}
	if ns.mem.ok {
		ws := workingSet(ns.mem.usage, ns.mem.stat.InactiveFile)
		vals[0], vals[1], vals[2], vals[3], vals[4], vals[5] = sub0(sub0(capacity, ws), ns.hugepages), ns.mem.usage, ws, ns.mem.stat.RSS, ns.mem.stat.PgFault, ns.mem.stat.PgMajFault
		node.Memory = &statsv1alpha1.MemoryStats{Time: ts, UsageBytes: &vals[1], WorkingSetBytes: &vals[2],
			RSSBytes: &vals[3], PageFaults: &vals[4], MajorPageFaults: &vals[5]}
		if ns.hugepagesOK {
			// An unknown pool leaves memory.available out (its
			// SignalError says why); the working set is still known.
			node.Memory.AvailableBytes = &vals[0]
		}
	}
	if psi != nil {
		if ns.psiOK[0] {
			if node.Memory == nil {
				node.Memory = &statsv1alpha1.MemoryStats{Time: ts}
			}
			node.Memory.PSI = &psi[0]
		}
		if ns.psiOK[1] {
			node.CPU = &statsv1alpha1.CPUStats{Time: ts, PSI: &psi[1]}
		}
		if ns.psiOK[2] {
			node.IO = &statsv1alpha1.IOStats{Time: ts, PSI: &psi[2]}
		}
	}
	if k := &ns.kubepods; k.ok && ns.mem.limitOK {
		limit := capacity
		if k.limit < limit {
			limit = k.limit
			obs.Node.KubepodsLimitBytes = k.limit
		}
		ws := workingSet(k.usage, k.stat.InactiveFile)
		vals[6], vals[7], vals[8] = sub0(limit, ws), k.usage, ws
		m := &statsv1alpha1.MemoryStats{Time: ts, AvailableBytes: &vals[6], UsageBytes: &vals[7], WorkingSetBytes: &vals[8]}
		if k.hasPSI {
			psiCopy := k.psi
			m.PSI = &psiCopy
		}
		node.SystemContainers = []statsv1alpha1.ContainerStats{{Name: statsv1alpha1.SystemContainerPods, StartTime: ts, Memory: m}}
		if k.swap.ok {
			swapStats(&swaps[1], ts, &k.swap, vals[24:26])
			node.SystemContainers[0].Swap = &swaps[1]
		}
	}
	// swap.available as the kubelet reports it: SwapFree, against SwapTotal;
	// no figure on a node without swap.
	if ns.swapOK && ns.swapTotal > 0 {
		free := min(ns.swapFree, ns.swapTotal)
		vals[26], vals[27] = free, ns.swapTotal-free
		swaps[0] = statsv1alpha1.SwapStats{Time: ts, SwapAvailableBytes: &vals[26], SwapUsageBytes: &vals[27]}
		node.Swap = &swaps[0]
	}
	if ns.fs.ok {
		node.Fs = fsStats(ts, &ns.fs, vals[9:14])
	}
	if ns.imagefs.ok || ns.containerfs.ok {
		// containerFs as the kubelet reports it since 1.30: the writable
		// layers' filesystem, imagefs's own figures when they share it.
		node.Runtime = &statsv1alpha1.RuntimeStats{}
		if ns.imagefs.ok {
			node.Runtime.ImageFs = fsStats(ts, &ns.imagefs, vals[14:19])
		}
		if ns.containerfs.ok {
			node.Runtime.ContainerFs = fsStats(ts, &ns.containerfs, vals[19:24])
		}
	}
	obs.Node.NodeFsPath, obs.Node.ImageFsPath = o.hostRel(o.node.nodefs), o.hostRel(o.node.imagefs)
	obs.Node.ContainerFsPath = o.hostRel(o.node.containerfs)
	if ns.fs.ok && ns.imagefs.ok && ns.containerfs.ok {
		obs.Node.DiskLayout = o.diskLayout(ns)
		if obs.Node.DiskLayout == fslayout.Unknown {
			o.warnLayoutOnce(obs.Node)
		}
	}
	if ns.pidsOK {
		r := make([]int64, 2)
		r[0], r[1] = int64(min(ns.pidMax, 1<<62)), int64(min(ns.tasks, 1<<62))
		node.Rlimit = &statsv1alpha1.RlimitStats{Time: ts, MaxPID: &r[0], NumOfRunningProcesses: &r[1]}
	}
}

func fsStats(ts metav1.Time, s *fsSample, v []uint64) *statsv1alpha1.FsStats {
	v[0], v[1], v[2], v[3], v[4] = s.available, s.capacity, s.used, s.inodesFree, s.inodes
	f := &statsv1alpha1.FsStats{Time: ts, AvailableBytes: &v[0], CapacityBytes: &v[1], UsedBytes: &v[2], InodesFree: &v[3], Inodes: &v[4]}
	if s.inodes >= s.inodesFree {
		used := s.inodes - s.inodesFree
		f.InodesUsed = &used
	}
	return f
}

// swapStats fills sw from a cgroup's swap sample, pointing into v (2 values).
func swapStats(sw *statsv1alpha1.SwapStats, ts metav1.Time, s *swapSample, v []uint64) {
	v[0] = s.usage
	*sw = statsv1alpha1.SwapStats{Time: ts, SwapUsageBytes: &v[0]}
	if s.availOK {
		v[1] = s.avail
		sw.SwapAvailableBytes = &v[1]
	}
}

func sub0(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
