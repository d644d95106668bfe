// SPDX-License-Identifier: Apache-2.0

// Package guestmem computes the VM node's memory.available the way the
// kubelet does on cgroup v2, from the files the guest kernel exposes. It is
// shared by the host-side tests (test/vmnode) and the guest agent
// (test/cmd/vmagent), which times threshold crossings inside the guest.
//
// cAdvisor over runc's libcontainer reads the root cgroup, which has no
// memory.current on v2: usage is MemTotal−MemFree from /proc/meminfo, the
// working set is usage minus the root memory.stat's inactive_file, and
// available is MemTotal minus the working set, which is MemFree plus
// inactive_file.
package guestmem

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Files are the guest files Available reads, in that order.
var Files = []string{"/proc/meminfo", "/sys/fs/cgroup/memory.stat"}

// Available computes memory.available from /proc/meminfo followed by the
// root cgroup's memory.stat (both files' contents, in one buffer): MemFree
// plus inactive_file.
func Available(meminfoAndStat []byte) (int64, error) {
	v, err := values(meminfoAndStat, "MemFree:", "inactive_file")
	if err != nil {
		return 0, err
	}
	return v["MemFree:"] + v["inactive_file"], nil
}

// RootUsageAvailable computes memory.available as evictd observes it on
// the v2 root (pkg/pressure: usage is the root memory.stat's anon + file,
// as runc's and cAdvisor's root stats take it), from the same files as
// Available: MemTotal minus (anon + file − inactive_file). It leaves out
// the kernel's own memory (slab, page tables, stacks) and the swap cache,
// which MemTotal − MemFree counts: on the swap node the two figures were
// 157 MiB apart, and a test that plans evictd's crossing must use this one.
func RootUsageAvailable(meminfoAndStat []byte) (int64, error) {
	v, err := values(meminfoAndStat, "MemTotal:", "anon", "file", "inactive_file")
	if err != nil {
		return 0, err
	}
	return v["MemTotal:"] - (v["anon"] + v["file"] - v["inactive_file"]), nil
}

// values reads keys from /proc/meminfo's lines (a key ending in ":", in
// kB, returned in bytes) and memory.stat's (bytes); each must be there.
func values(meminfoAndStat []byte, keys ...string) (map[string]int64, error) {
	out := map[string]int64{}
	s := bufio.NewScanner(bytes.NewReader(meminfoAndStat))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) < 2 || !slices.Contains(keys, string(f[0])) {
			continue
		}
		v, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", s.Text(), err)
		}
		if strings.HasSuffix(string(f[0]), ":") {
			v <<= 10 // kB
		}
		out[string(f[0])] = v
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			first, _, _ := bytes.Cut(meminfoAndStat, []byte("\n"))
			return nil, fmt.Errorf("no %s (/proc/meminfo, then the root memory.stat) in %q", strings.TrimSuffix(k, ":"), first)
		}
	}
	return out, nil
}
