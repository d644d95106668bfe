package pressure

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
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
		mp := unescapeMountinfo(pre[4])
		if filepath.Base(mp) != rootfsMountDir {
			continue
		}
		id := filepath.Base(filepath.Dir(mp))
		if !isContainerID(id) {
			continue
		}
		for _, opt := range strings.Split(post[2], ",") {
			if v, ok := strings.CutPrefix(opt, "upperdir="); ok {
				into[id] = unescapeMountinfo(v)
				break
			}
		}
	}
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space,
// \054 for a comma in overlay options, \134 for a backslash).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			out.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

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

// containerIDOfCgroup returns the container ID a pod's child cgroup is
// named for: the ID itself (cgroupfs driver) or <runtime>-<ID>.scope
// (systemd driver: cri-containerd-, crio-, docker-); "" for other names.
func containerIDOfCgroup(name string) string {
	name = strings.TrimSuffix(name, ".scope")
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		name = name[i+1:]
	}
	if !isContainerID(name) {
		return ""
	}
	return name
}

// writableLayers finds the containers' upper directories.
type writableLayers struct {
	mountinfo string            // <host root>/proc/1/mountinfo
	upper     map[string]string // container ID -> upper directory on the host
	readAt    time.Time         // when mountinfo was last read
	// warned: each cause of a writable layer left out is logged once.
	warned map[string]bool
}

// writableDirs returns the upper directories, under the host root, of the
// containers in the pod's cgroup. The host's mount table is read again when
// a container is not in the last reading, at most once per
// EphemeralRefresh (a node of another runtime has none of its containers
// there): a container's upper directory does not change while it exists.
func (o *Observer) writableDirs(e *podEntry, now time.Time) []string {
	w := &o.writable
	ents, err := os.ReadDir(filepath.Join(o.hier.memory, e.rel))
	if err != nil {
		return nil // the pod is going: its cgroup read fails and says so
	}
	var dirs []string
	for _, ent := range ents {
		id := containerIDOfCgroup(ent.Name())
		if !ent.IsDir() || id == "" {
			continue
		}
		up, ok := w.upper[id]
		if !ok && (w.readAt.IsZero() || now.Sub(w.readAt) >= o.opts.EphemeralRefresh) {
			w.readAt = now
			b, err := os.ReadFile(w.mountinfo)
			if err != nil {
				o.warnWritable("cannot read the host's mount table; containers' writable layers are left out of ephemeral storage",
					zap.String("file", o.hostRel(w.mountinfo)), zap.Error(err))
				return dirs
			}
			clear(w.upper)
			parseRootfsMounts(b, w.upper)
			up, ok = w.upper[id]
		}
		if !ok {
			// Not a containerd rootfs overlay (another runtime or
			// snapshotter), or a container still starting.
			continue
		}
		dirs = append(dirs, filepath.Join(o.opts.HostRoot, up))
	}
	return dirs
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
