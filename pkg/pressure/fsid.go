// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evictd/evictd/pkg/fslayout"
	"go.uber.org/zap"
)

// layoutCache is the disk layout last told from the host's mount table,
// for the st_dev values it was told for: the mount table is read only when
// those change, and only when they differ at all (one st_dev is one
// filesystem however it is mounted).
type layoutCache struct {
	devs   [3]uint64
	layout fslayout.Layout
	ok     bool
	warned bool // a mount table that could not be used was reported
}

// diskLayout tells the layout of nodefs, imagefs and containerfs as the
// kubelet does: by block device (fslayout.Identify), so that two btrfs
// subvolumes of one disk are one filesystem. Without a usable mount table it
// falls back to st_dev, and says so once.
func (o *Observer) diskLayout(ns *nodeSample) fslayout.Layout {
	n := &o.node
	devs := [3]uint64{ns.fs.dev, ns.imagefs.dev, ns.containerfs.dev}
	if devs[0] == devs[1] && devs[1] == devs[2] {
		return fslayout.OneFs
	}
	if c := &n.layoutCache; c.ok && c.devs == devs {
		return c.layout
	}
	mountinfo := filepath.Join(n.hostRoot, "proc/1/mountinfo")
	b, err := os.ReadFile(mountinfo)
	var mounts []fslayout.Mount
	if err == nil {
		mounts, err = fslayout.ParseMountInfo(b)
	}
	if err != nil {
		if !n.layoutCache.warned {
			n.layoutCache.warned = true
			o.log.Warn("cannot read the host's mount table; filesystems are told apart by st_dev, so btrfs subvolumes of one disk count as filesystems of their own",
				zap.String("file", o.hostRel(mountinfo)), zap.Error(err))
		}
		return fslayout.Of(devs[0], devs[1], devs[2])
	}
	var ids [3]fslayout.FsID
	for i, p := range [3]string{n.nodefs, n.imagefs, n.containerfs} {
		ids[i] = fslayout.Identify(mounts, o.hostPath(p), devs[i])
	}
	l := fslayout.Of(ids[0], ids[1], ids[2])
	n.layoutCache = layoutCache{devs: devs, layout: l, ok: true, warned: n.layoutCache.warned}
	return l
}

// hostPath is p (under the host root) as the host's mount table names it:
// relative to the host root, with symlinks resolved there. When it cannot
// be resolved, the path as given.
func (o *Observer) hostPath(p string) string {
	rel := o.hostRel(p)
	if r, err := resolveInRoot(o.opts.HostRoot, rel); err == nil {
		return r
	}
	return rel
}

// maxSymlinks is how many symlinks resolveInRoot follows, as the kernel's
// path walk (ELOOP past 40).
const maxSymlinks = 40

// resolveInRoot resolves the symlinks of the absolute path p as the host
// would, with root as its "/": an absolute link target starts again at
// root, and ".." never climbs above it.
func resolveInRoot(root, p string) (string, error) {
	todo := strings.Split(p, "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		cur := filepath.Join(root, filepath.Join(done...), c)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if links++; links > maxSymlinks {
			return "", fmt.Errorf("%s: more than %d symlinks", p, maxSymlinks)
		}
		target, err := os.Readlink(cur)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return "/" + strings.Join(done, "/"), nil
}
