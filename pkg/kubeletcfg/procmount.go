// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// hidepidOf is the hidepid option ("hidepid=invisible") of the proc
// filesystem mounted at procDir, as evictd's own mount table shows it; ""
// when there is none, or procDir is no proc mount.
func hidepidOf(procDir string) string {
	dir, err := filepath.EvalSymlinks(procDir)
	if err != nil {
		return ""
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return ""
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	return HidepidOf(data, dir)
}

// HidepidOf reads a mountinfo table (proc(5)) for the mount at dir and
// returns its hidepid option when it is a proc filesystem that hides
// processes (any value but 0 or off); "" otherwise. The last mount at dir
// is the one on top.
func HidepidOf(mountinfo []byte, dir string) string {
	found := ""
	for _, line := range strings.Split(string(mountinfo), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || unescape(f[4]) != dir {
			continue
		}
		found = ""
		if g[0] != "proc" {
			continue
		}
		for _, opt := range strings.Split(g[2], ",") {
			if v, ok := strings.CutPrefix(opt, "hidepid="); ok && v != "0" && v != "off" {
				found = opt
			}
		}
	}
	return found
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash ("\040").
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
