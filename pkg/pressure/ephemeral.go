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
// walking the stalest pods first. The parts are the kubelet's: the
// containers' writable layers (writable.go), their logs, and the pod's
// disk-backed emptyDirs.

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
	// Logs is the pod's /var/log/pods directory, on nodefs.
	Logs DiskUsage `json:"logs"`
	// Volumes is the pod's disk-backed emptyDirs, on nodefs.
	Volumes DiskUsage `json:"volumes"`
}

// DiskUsage is bytes (allocated blocks) and inodes in use.
type DiskUsage struct {
	Bytes  uint64 `json:"bytes"`
	Inodes uint64 `json:"inodes"`
}

// emptyDirPath is where the kubelet keeps a pod's emptyDir volumes.
func (o *Observer) emptyDirPath(uid string) string {
	return filepath.Join(o.opts.HostRoot, "var/lib/kubelet/pods", uid, "volumes/kubernetes.io~empty-dir")
}

// refreshEphemeral re-measures the pods whose figure is older than
// EphemeralRefresh, stalest first, within the pass budget.
func (o *Observer) refreshEphemeral(ctx context.Context, now time.Time) {
	stale := o.stale[:0]
	for _, e := range o.active {
		if e.eph.at.IsZero() || now.Sub(e.eph.at) >= o.opts.EphemeralRefresh {
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
	slices.SortStableFunc(stale, func(a, b *podEntry) int { return a.eph.at.Compare(b.eph.at) })
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
		measure(o.emptyDirPath(e.uid), &parts.Volumes)
		if e.logDir != "" {
			measure(e.logDir, &parts.Logs)
		}
		for _, dir := range o.writableDirs(e, now) {
			if !measure(dir, &parts.WritableLayer) {
				o.warnWritable("a container's writable layer is not under the host root; writable layers are left out of ephemeral storage until the runtime's store is mounted",
					zap.String("pod", e.key()), zap.String("dir", o.hostRel(dir)))
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

func (w *duWalker) walkDir(dir string, dev uint64, stack []string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return stack, nil // removed while walking
		}
		return stack, err
	}
	defer f.Close()
	var st unix.Stat_t
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if w.visited >= w.budget {
				w.cut = true
				return stack, nil
			}
			w.visited++
			p := filepath.Join(dir, name)
			if unix.Lstat(p, &st) != nil || st.Dev != dev {
				continue
			}
			isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
			if !isDir && st.Nlink > 1 {
				key := [2]uint64{st.Dev, st.Ino}
				if _, dup := w.seen[key]; dup {
					continue
				}
				if w.seen == nil {
					w.seen = map[[2]uint64]struct{}{}
				}
				w.seen[key] = struct{}{}
			}
			w.inodes++
			w.bytes += uint64(st.Blocks) * 512
			if isDir {
				stack = append(stack, p)
			}
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			return stack, nil
		}
		if err != nil {
			return stack, err
		}
	}
}
