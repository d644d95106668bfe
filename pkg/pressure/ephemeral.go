// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Ephemeral storage is the costly signal: it needs a walk of every file a
// pod wrote to its emptyDir volumes and logs, and a pod can hold millions.
// Its cost is bounded two ways (see Options): each pod's figure is cached for
// EphemeralRefresh, and one Observe visits at most EphemeralBudget entries,
// walking the stalest pods first.
//
// What counts is what the kubelet counts (pkg/kubelet/stats:
// makePodStorageStats and calcEphemeralStorage for the Summary's total,
// pkg/kubelet/eviction: podDiskUsage for the ranking):
//   - the containers' writable layers (writable.go);
//   - their logs, by container directory: the files directly in
//     /var/log/pods/<ns>_<name>_<uid>/<container>/, not its subdirectories
//     (the kubelet's getPodContainerLogStats measures each file of that
//     directory and skips directories);
//   - the pod's local ephemeral volumes, those its IsLocalEphemeralVolume
//     (pkg/volume/util) names: emptyDirs of the default medium, configMaps
//     and gitRepos, which the kubelet keeps on disk. Secrets, downwardAPI
//     and projected volumes are tmpfs mounts, and so are memory-medium
//     emptyDirs (hugepages ones hugetlbfs): the walk does not cross into
//     another filesystem, so none of them counts, as in the kubelet.
//     hostPath volumes have no directory of the pod's and no stats;
//   - in the Summary's total only, not in the ranking's parts: the files
//     directly in the pod's log directory (getPodLogStats) and the pod's
//     etc-hosts file (getPodEtcHostsStats).

// ephemeralState is a pod's cached ephemeral-storage figure.
type ephemeralState struct {
	at     time.Time // when measured; zero: never, or due now
	known  bool      // one of the pod's directories existed
	used   uint64    // bytes in use (allocated blocks, as du counts them)
	inodes uint64
	// parts splits used and inodes by where they are.
	parts   EphemeralParts
	partial bool // the walk stopped at the budget: a lower bound
	warned  bool // the partial walk was reported
}

// EphemeralParts is a pod's ephemeral storage by part, as the kubelet
// counts each: the ranking of a disk signal adds up only the parts on the
// filesystem that is short.
type EphemeralParts struct {
	// WritableLayer is the containers' writable layers (the Summary's
	// containers[].rootfs), on the runtime's filesystem.
	WritableLayer DiskUsage `json:"writableLayer"`
	// Logs is the containers' logs, the files of each container's
	// directory in /var/log/pods/<pod>, on nodefs (the Summary's
	// containers[].logs).
	Logs DiskUsage `json:"logs"`
	// Volumes is the pod's local ephemeral volumes (default-medium
	// emptyDirs, configMaps, gitRepos), on nodefs.
	Volumes DiskUsage `json:"volumes"`
}

// DiskUsage is bytes (allocated blocks) and inodes in use.
type DiskUsage struct {
	Bytes  uint64 `json:"bytes"`
	Inodes uint64 `json:"inodes"`
}

// localVolumePluginDirs are the directories, under a pod's volumes
// directory, of the volume plugins whose volumes IsLocalEphemeralVolume
// counts: the kubelet escapes each plugin's name ("kubernetes.io/configmap")
// into one ("kubernetes.io~configmap"). configMap and gitRepo volumes are
// emptyDirs of the default medium underneath, set up in their own plugin's
// directory.
var localVolumePluginDirs = [...]string{"kubernetes.io~empty-dir", "kubernetes.io~configmap", "kubernetes.io~git-repo"}

// podDir is the kubelet's directory of a pod.
func (o *Observer) podDir(uid string) string {
	return filepath.Join(o.opts.HostRoot, "var/lib/kubelet/pods", uid)
}

// RemeasureEphemeral makes every following observation walk these pods'
// ephemeral storage, whatever the age of their figure, before any other
// pod's within the pass budget; the next call replaces the set. They are
// the victims of a disk eviction: a victim may go on writing through its
// grace period, and a figure up to EphemeralRefresh old would miss what
// it wrote, leaving the fall of the node's available space to no pod, and
// another pod evicted for it (seen on the real node: TestNodeDiskInodes).
func (o *Observer) RemeasureEphemeral(uids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.remeasure)
	for _, uid := range uids {
		if o.remeasure == nil {
			o.remeasure = map[string]bool{}
		}
		o.remeasure[uid] = true
	}
}

// refreshEphemeral re-measures the pods named by RemeasureEphemeral and
// those whose figure is older than EphemeralRefresh, in that order and
// stalest first, within the pass budget.
func (o *Observer) refreshEphemeral(ctx context.Context, now time.Time) {
	stale := o.stale[:0]
	for _, e := range o.active {
		if e.eph.at.IsZero() || now.Sub(e.eph.at) >= o.opts.EphemeralRefresh || o.remeasure[e.uid] {
			stale = append(stale, e)
		}
	}
	defer func() {
		clear(stale) // drop the pointers so pruned pods can be collected
		o.stale = stale[:0]
	}()
	if len(stale) == 0 {
		return
	}
	slices.SortStableFunc(stale, func(a, b *podEntry) int {
		if ra, rb := o.remeasure[a.uid], o.remeasure[b.uid]; ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return a.eph.at.Compare(b.eph.at)
	})
	budget := o.opts.EphemeralBudget
	for _, e := range stale {
		if budget <= 0 || ctx.Err() != nil {
			return
		}
		w := duWalker{budget: budget}
		found := false
		var parts EphemeralParts
		measure := func(dir string, into *DiskUsage) bool {
			b, n := w.bytes, w.inodes
			ok, err := w.walk(dir)
			if err != nil {
				o.log.Warn("cannot measure pod ephemeral storage", zap.String("pod", e.key()), zap.String("dir", dir), zap.Error(err))
			}
			into.Bytes += w.bytes - b
			into.Inodes += w.inodes - n
			found = found || ok
			return ok
		}
		podDir := o.podDir(e.uid)
		for _, d := range localVolumePluginDirs {
			measure(filepath.Join(podDir, "volumes", d), &parts.Volumes)
		}
		note := func(dir string, ok bool, err error) {
			if err != nil {
				o.log.Warn("cannot measure pod ephemeral storage", zap.String("pod", e.key()), zap.String("dir", dir), zap.Error(err))
			}
			found = found || ok
		}
		// etc-hosts and the files directly in the pod's log directory
		// count in the total only: the kubelet's ranking leaves them out.
		ok, err := w.file(filepath.Join(podDir, "etc-hosts"))
		note(podDir, ok, err)
		if e.logDir != "" {
			var containerDirs []string
			ok, err := w.files(e.logDir, func(p string) { containerDirs = append(containerDirs, p) })
			note(e.logDir, ok, err)
			for _, dir := range containerDirs {
				b, n := w.bytes, w.inodes
				_, err := w.files(dir, nil)
				note(dir, false, err)
				parts.Logs.Bytes += w.bytes - b
				parts.Logs.Inodes += w.inodes - n
			}
		}
		for _, l := range o.writableDirs(e, now) {
			if !measure(l.path, &parts.WritableLayer) {
				o.warnWritable("a container's writable layer is not under the host root; writable layers are left out of ephemeral storage until the runtime's store is mounted",
					zap.String("pod", e.key()), zap.String("dir", o.hostRel(l.path)))
				continue
			}
			if l.self {
				b, n := w.bytes, w.inodes
				_, err := w.file(l.path)
				note(l.path, true, err)
				parts.WritableLayer.Bytes += w.bytes - b
				parts.WritableLayer.Inodes += w.inodes - n
			}
		}
		budget -= w.visited
		warned := e.eph.warned
		e.eph = ephemeralState{at: now, known: found, used: w.bytes, inodes: w.inodes, parts: parts, partial: w.cut, warned: warned}
		if w.cut && !warned {
			e.eph.warned = true
			o.log.Warn("pod ephemeral storage walk cut at the entry budget; the figure is a lower bound",
				zap.String("pod", e.key()), zap.Int("budget", o.opts.EphemeralBudget))
		}
	}
}

// duWalker adds up disk usage like `du -x`: allocated blocks, each
// hard-linked inode once, without crossing into other filesystems (a
// memory-backed emptyDir is a tmpfs mount whose pages count as memory, not
// ephemeral storage).
type duWalker struct {
	budget  int
	visited int
	bytes   uint64
	inodes  uint64
	cut     bool
	seen    map[[2]uint64]struct{}
}

// walk adds up everything beneath root (not root itself). It reports
// whether root exists.
func (w *duWalker) walk(root string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return true, nil
	}
	dev := st.Dev
	stack := []string{root}
	for len(stack) > 0 && !w.cut {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var err error
		stack, err = w.walkDir(dir, dev, stack)
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

// file adds up the entry p itself, as the kubelet measures one file. It
// reports whether p exists.
func (w *duWalker) file(p string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if w.visited >= w.budget {
		w.cut = true
		return true, nil
	}
	w.visited++
	w.add(&st)
	return true, nil
}

// files adds up the entries directly in dir that are not directories, as
// the kubelet measures a log directory (fileMetricsByDir), and hands each
// subdirectory to sub (when not nil) instead of counting it. It reports
// whether dir exists.
func (w *duWalker) files(dir string, sub func(string)) (bool, error) {
	return w.entries(dir, func(p string, st *unix.Stat_t) {
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			w.add(st)
		} else if sub != nil {
			sub(p)
		}
	})
}

// entries hands each entry of dir that can still be stat'ed (an entry
// removed meanwhile, a rotated log, is skipped) to each, within the walk's
// budget: once it is spent, the walk is cut short. It reports whether dir
// exists.
func (w *duWalker) entries(dir string, each func(p string, st *unix.Stat_t)) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	var st unix.Stat_t
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if w.visited >= w.budget {
				w.cut = true
				return true, nil
			}
			w.visited++
			p := filepath.Join(dir, name)
			if unix.Lstat(p, &st) == nil {
				each(p, &st)
			}
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			return true, nil
		}
		if err != nil {
			return true, err
		}
	}
}

// add counts one inode's blocks, a hard-linked one once.
func (w *duWalker) add(st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
		key := [2]uint64{st.Dev, st.Ino}
		if _, dup := w.seen[key]; dup {
			return
		}
		if w.seen == nil {
			w.seen = map[[2]uint64]struct{}{}
		}
		w.seen[key] = struct{}{}
	}
	w.inodes++
	w.bytes += uint64(st.Blocks) * 512
}

func (w *duWalker) walkDir(dir string, dev uint64, stack []string) ([]string, error) {
	// A directory removed while walking is no error.
	_, err := w.entries(dir, func(p string, st *unix.Stat_t) {
		if st.Dev != dev {
			return
		}
		w.add(st)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			stack = append(stack, p)
		}
	})
	return stack, err
}
