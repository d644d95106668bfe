// SPDX-License-Identifier: Apache-2.0

package fslayout

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Mount is what the layout needs of one line of a mount table
// (/proc/<pid>/mountinfo, proc(5)).
type Mount struct {
	// MountPoint is where it is mounted, unescaped.
	MountPoint string
	// FSType is the filesystem type ("ext4", "btrfs", "overlay").
	FSType string
	// Source is the mount source: the block device for a disk filesystem
	// ("/dev/sda2"), a name or "none" for the others.
	Source string
	// Major and Minor are the device number the kernel shows; for btrfs
	// the filesystem's, which no subvolume's st_dev equals.
	Major, Minor uint32
}

// ParseMountInfo reads a mount table:
//
//	id parent major:minor root mountpoint options [optional fields...] - fstype source superoptions
//
// A line of another shape is an error naming it: the layout is told from
// every line, and a table read wrong could join two filesystems.
func ParseMountInfo(b []byte) ([]Mount, error) {
	var mounts []Mount
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseMountLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d %q: %w", n, line, err)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

func parseMountLine(line string) (Mount, error) {
	f := strings.Fields(line)
	// The optional fields end at the first lone "-"; the mount point and
	// root cannot be one (a space in them is escaped as \040).
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 6 || sep < 0 {
		return Mount{}, fmt.Errorf("no \" - \" separator after the six leading fields")
	}
	if len(f)-sep-1 < 3 {
		return Mount{}, fmt.Errorf("want filesystem type, source and super options after \" - \", have %d fields", len(f)-sep-1)
	}
	majS, minS, ok := strings.Cut(f[2], ":")
	if !ok {
		return Mount{}, fmt.Errorf("device %q is not major:minor", f[2])
	}
	maj, err1 := strconv.ParseUint(majS, 10, 32)
	min, err2 := strconv.ParseUint(minS, 10, 32)
	if err1 != nil || err2 != nil {
		return Mount{}, fmt.Errorf("device %q is not major:minor", f[2])
	}
	if !strings.HasPrefix(f[4], "/") {
		return Mount{}, fmt.Errorf("mount point %q is not absolute", f[4])
	}
	return Mount{
		MountPoint: UnescapeMountinfo(f[4]),
		FSType:     f[sep+1],
		Source:     UnescapeMountinfo(f[sep+2]),
		Major:      uint32(maj),
		Minor:      uint32(min),
	}, nil
}

// UnescapeMountinfo undoes the kernel's octal escapes in a mountinfo field
// (\040 for a space, \011 a tab, \012 a newline, \054 a comma in overlay
// options, \134 a backslash).
func UnescapeMountinfo(s string) string {
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

// MountOf is the mount that holds path (absolute, symlinks resolved): the
// one whose mount point is the longest prefix of it, by whole components;
// of several at one mount point, the last in the table, which is mounted
// over the others.
func MountOf(mounts []Mount, path string) (Mount, bool) {
	best, found := Mount{}, false
	for _, m := range mounts {
		if !under(path, m.MountPoint) {
			continue
		}
		if !found || len(m.MountPoint) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	return best, found
}

// under reports whether path is dir or beneath it.
func under(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	rest, ok := strings.CutPrefix(path, dir)
	return ok && (rest == "" || rest[0] == '/')
}

// FsID tells filesystems apart as the kubelet does. cadvisor, which the
// kubelet asks for the device of its root and of the image store
// (GetDirFsDevice in cadvisor's fs package), names a filesystem by the
// source of its mount, the block device; the kubelet then compares those
// names (HasDedicatedImageFs). For most filesystems st_dev is that device.
// Each btrfs subvolume has an anonymous st_dev of its own (0:NN), so two
// subvolumes of one disk look like two filesystems by st_dev, where cadvisor
// finds the one device they are mounted from.
type FsID struct {
	// Device is the block device of a btrfs mount; "" for the others.
	Device string
	// Dev is st_dev, when Device is "".
	Dev uint64
}

// Identify names the filesystem holding path, whose st_dev is dev, from the
// host's mount table: its block device when it is a btrfs mount from one,
// else dev.
func Identify(mounts []Mount, path string, dev uint64) FsID {
	if m, ok := MountOf(mounts, path); ok && m.FSType == "btrfs" && strings.HasPrefix(m.Source, "/dev/") {
		return FsID{Device: m.Source}
	}
	return FsID{Dev: dev}
}
