// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/fslayout"
)

// A container's writable layer is the upper directory of the overlay that
// is its root filesystem. containerd's shim mounts that overlay on the host,
// at <state dir>/io.containerd.runtime.v2.task/<namespace>/<container ID>/rootfs,
// so the host's mount table (/proc/1/mountinfo through the host root's
// proc) maps each container ID to its upper directory, which is then
// measured like an emptyDir, within the same walk budget. This is what
// containerd itself reports as the writable layer's usage (a du of the
// snapshot's upper directory) and the kubelet shows as a container's rootfs.
//
// It needs nothing beyond the read-only mounts evictd already has (the
// host's proc and the image store): not the runtime's socket, which would
// grant control of every container, nor the kubelet's API, which needs a
// network call, trust in its serving certificate and nodes/stats.

// rootfsMountDir is the last directory of a containerd rootfs mount point.
const rootfsMountDir = "rootfs"

// parseRootfsMounts adds to into the upper directory of every overlay in
// the mountinfo content b whose mount point is <...>/<container ID>/rootfs,
// keyed by the container ID. Lines of other shapes are ignored: the table
// holds every mount of the host.
func parseRootfsMounts(b []byte, into map[string]string) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		sep := bytes.Index(line, []byte(" - "))
		if sep < 0 {
			continue
		}
		pre := strings.Fields(string(line[:sep]))
		post := strings.Fields(string(line[sep+3:]))
		if len(pre) < 5 || len(post) < 3 || post[0] != "overlay" {
			continue
		}
		mp := fslayout.UnescapeMountinfo(pre[4])
		if filepath.Base(mp) != rootfsMountDir {
			continue
		}
		id := filepath.Base(filepath.Dir(mp))
		if !isContainerID(id) {
			continue
		}
		for _, opt := range strings.Split(post[2], ",") {
			if v, ok := strings.CutPrefix(opt, "upperdir="); ok {
				into[id] = fslayout.UnescapeMountinfo(v)
				break
			}
		}
	}
}

// isContainerID reports whether s is a CRI container ID: 64 lower-case hex
// digits.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ContainerIDOfCgroup returns the container ID a pod's child cgroup is
// named for: the ID itself (cgroupfs driver) or <runtime>-<ID>.scope
// (systemd driver: cri-containerd-, crio-, docker-); "" for other names.
// CRI-O's conmon scope (crio-conmon-<ID>.scope) gives its container's ID.
func ContainerIDOfCgroup(name string) string {
	name = strings.TrimSuffix(name, ".scope")
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		name = name[i+1:]
	}
	if !isContainerID(name) {
		return ""
	}
	return name
}

// writableLayers finds the containers' upper directories: from the host's
// mount table for containerd, from CRI-O's container store (crio.go) when
// the containerfs holds one.
type writableLayers struct {
	hostRoot  string
	mountinfo string            // <host root>/proc/1/mountinfo
	upper     map[string]string // container ID -> upper directory on the host
	// crioStore is <host root><containerfs>: CRI-O's graph root when it has
	// an overlay-containers directory, as CRI-O's does from its start.
	crioStore string
	crio      bool                     // the last reading was of CRI-O's store
	crioPart  bool                     // a container file of it could not be read
	crioCtrs  map[string]crioContainer // container ID -> CRI-O's record
	readAt    time.Time                // when the sources were last read
	// warned: each cause of a writable layer left out is logged once.
	warned map[string]bool
}

// writableDir is a container's writable layer on the host.
type writableDir struct {
	path string
	// self: the directory itself counts, as cadvisor's GetDirUsage counts
	// it, through which the kubelet measures CRI-O's layers.
	self bool
}

// writableDirs returns the writable layers, under the host root, of the
// containers in the pod's cgroup. The runtime's records are read again when
// a container is not in the last reading, at most once per
// EphemeralRefresh (a node of another runtime has none of its containers
// there): a container's writable layer does not change while it exists.
// A container appears once, though CRI-O's conmon has a cgroup of its own
// named for it (crio-conmon-<ID>.scope).
func (o *Observer) writableDirs(e *podEntry, now time.Time) []writableDir {
	w := &o.writable
	ents, err := os.ReadDir(filepath.Join(o.hier.memory, e.rel))
	if err != nil {
		return nil // the pod is going: its cgroup read fails and says so
	}
	var dirs []writableDir
	var ids []string
	for _, ent := range ents {
		id := ContainerIDOfCgroup(ent.Name())
		if !ent.IsDir() || id == "" || slices.Contains(ids, id) {
			continue
		}
		ids = append(ids, id)
		dir, known := w.lookup(id)
		if !known && (w.readAt.IsZero() || now.Sub(w.readAt) >= o.opts.EphemeralRefresh) {
			w.readAt = now
			if !o.readWritableSources() {
				return dirs
			}
			dir, known = w.lookup(id)
			if !known && w.crio && !w.crioPart {
				o.warnWritable("a pod's container is in neither of CRI-O's container files (is the store transient, under the run root?); its writable layer is left out of ephemeral storage",
					zap.String("pod", e.key()), zap.String("container", id), zap.String("dir", o.hostRel(filepath.Join(w.crioStore, crioContainersDir))))
			}
		}
		if !known {
			// Not a containerd rootfs overlay (another runtime or
			// snapshotter), or a container still starting.
			continue
		}
		if w.crio {
			c := w.crioCtrs[id]
			if c.bad != "" {
				o.warnWritable("a CRI-O container's record is unusable; its writable layer is left out of ephemeral storage",
					zap.String("pod", e.key()), zap.String("file", c.file), zap.String("container", id), zap.String("reason", c.bad))
				continue
			}
			if c.sandbox {
				continue // the kubelet leaves the sandbox's layer out
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// lookup returns the container's writable layer from the last reading, and
// whether the container was in it.
func (w *writableLayers) lookup(id string) (writableDir, bool) {
	if w.crio {
		c, ok := w.crioCtrs[id]
		if !ok || c.layer == "" {
			return writableDir{}, ok
		}
		return writableDir{path: filepath.Join(w.crioStore, crioLayersDir, c.layer, crioLayerUpperDir), self: true}, true
	}
	up, ok := w.upper[id]
	if !ok {
		return writableDir{}, false
	}
	return writableDir{path: filepath.Join(w.hostRoot, up)}, true
}

// readWritableSources reads CRI-O's container files when the containerfs is
// CRI-O's store, else the host's mount table. It reports false, having
// warned, when the source cannot be read at all.
func (o *Observer) readWritableSources() bool {
	w := &o.writable
	w.crio = isDir(filepath.Join(w.crioStore, crioContainersDir))
	if !w.crio {
		b, err := os.ReadFile(w.mountinfo)
		if err != nil {
			o.warnWritable("cannot read the host's mount table; containers' writable layers are left out of ephemeral storage",
				zap.String("file", o.hostRel(w.mountinfo)), zap.Error(err))
			return false
		}
		clear(w.upper)
		parseRootfsMounts(b, w.upper)
		return true
	}
	if w.crioCtrs == nil {
		w.crioCtrs = map[string]crioContainer{}
	}
	clear(w.crioCtrs)
	w.crioPart = false
	for _, name := range crioContainerFiles {
		p := filepath.Join(w.crioStore, crioContainersDir, name)
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // containers/storage writes a file once it has a container of its kind
		}
		if err == nil {
			err = parseCRIOContainers(b, o.hostRel(p), w.crioCtrs)
		}
		if err != nil {
			w.crioPart = true
			o.warnWritable("cannot read CRI-O's container file; the writable layers of its containers are left out of ephemeral storage",
				zap.String("file", o.hostRel(p)), zap.Error(err))
		}
	}
	return true
}

// warnWritable logs msg the first time it is seen.
func (o *Observer) warnWritable(msg string, fields ...zap.Field) {
	if o.writable.warned[msg] {
		return
	}
	if o.writable.warned == nil {
		o.writable.warned = map[string]bool{}
	}
	o.writable.warned[msg] = true
	o.log.Warn(msg, fields...)
}
