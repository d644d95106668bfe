// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/test/internal/stale"
)

// hostRootPrefix names host roots under the temp dir (see package stale).
const hostRootPrefix = "evictd-node"

// hostRoot is the node's view of a host filesystem:
//
//	sys -> /sys, proc -> /proc           the real kernel files
//	var/                                 a tmpfs of DiskBytes when asked for
//	  lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>/
//	  log/pods/<namespace>_<name>_<uid>/<container>/0.log
//	  lib/containerd/                    the image store (imagefs)
type hostRoot struct {
	root    string
	mounted bool
}

func newHostRoot(tempDir string, diskBytes, diskInodes int64) (*hostRoot, error) {
	h := &hostRoot{root: filepath.Join(tempDir, stale.Name(hostRootPrefix))}
	if err := os.MkdirAll(filepath.Join(h.root, "var"), 0o755); err != nil {
		return nil, err
	}
	for _, l := range []string{"sys", "proc"} {
		if err := os.Symlink("/"+l, filepath.Join(h.root, l)); err != nil {
			return h, err
		}
	}
	if diskBytes > 0 {
		opts := "size=" + strconv.FormatInt(diskBytes, 10) + ",mode=755"
		if diskInodes > 0 {
			opts += ",nr_inodes=" + strconv.FormatInt(diskInodes, 10)
		}
		if err := syscall.Mount("tmpfs", filepath.Join(h.root, "var"), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
			return h, fmt.Errorf("mount a %d-byte tmpfs at %s: %w", diskBytes, filepath.Join(h.root, "var"), err)
		}
		h.mounted = true
	}
	for _, d := range []string{h.kubeletPods(), h.podLogs(), h.imageFS()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return h, err
		}
	}
	return h, nil
}

func (h *hostRoot) kubeletPods() string {
	return filepath.Join(h.root, "var", "lib", "kubelet", "pods")
}
func (h *hostRoot) podLogs() string { return filepath.Join(h.root, "var", "log", "pods") }
func (h *hostRoot) imageFS() string { return filepath.Join(h.root, "var", "lib", "containerd") }

func (h *hostRoot) podDir(uid types.UID) string { return filepath.Join(h.kubeletPods(), string(uid)) }

func (h *hostRoot) emptyDir(uid types.UID, volume string) string {
	return filepath.Join(h.podDir(uid), "volumes", "kubernetes.io~empty-dir", volume)
}

func (h *hostRoot) podLogDir(pod *corev1.Pod) string {
	return filepath.Join(h.podLogs(), pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// capacity is the size of the filesystem under var/lib/kubelet.
func (h *hostRoot) capacity() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(h.kubeletPods(), &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", h.kubeletPods(), err)
	}
	return int64(st.Blocks) * st.Bsize, nil
}

func (h *hostRoot) remove() error { return removeHostRoot(h.root) }

// removeHostRoot unmounts whatever is mounted under root, deepest first
// (lazily when busy), then removes the tree. The sys and proc links are
// removed as links; their targets are never followed.
func removeHostRoot(root string) error {
	if err := unmountUnder(root); err != nil {
		return err // never delete into a mount still there
	}
	return os.RemoveAll(root)
}

// mountsUnder lists the mount points at or below root, deepest first.
func mountsUnder(root string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == root || strings.HasPrefix(mp, root+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, s.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts whatever is mounted under root, deepest first, lazily
// when busy.
func unmountUnder(root string) error {
	mounts, err := mountsUnder(root)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if err := syscall.Unmount(m, 0); err != nil {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}
