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
	"strconv"
)

// Files are the guest files Available reads, in that order.
var Files = []string{"/proc/meminfo", "/sys/fs/cgroup/memory.stat"}

// Available computes memory.available from /proc/meminfo followed by the
// root cgroup's memory.stat (both files' contents, in one buffer): MemFree
// plus inactive_file.
func Available(meminfoAndStat []byte) (int64, error) {
	var free, inactiveFile int64 = -1, -1
	s := bufio.NewScanner(bytes.NewReader(meminfoAndStat))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) < 2 {
			continue
		}
		key := string(f[0])
		if key != "MemFree:" && key != "inactive_file" {
			continue
		}
		v, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("line %q: %w", s.Text(), err)
		}
		if key == "MemFree:" {
			free = v << 10 // kB
		} else {
			inactiveFile = v // bytes
		}
	}
	if free < 0 || inactiveFile < 0 {
		first, _, _ := bytes.Cut(meminfoAndStat, []byte("\n"))
		return 0, fmt.Errorf("no MemFree (/proc/meminfo) or inactive_file (memory.stat) in %q", first)
	}
	return free + inactiveFile, nil
}

// RootUsageAvailable computes memory.available as evictd observes it on
// the v2 root (pkg/pressure: usage is the root memory.stat's anon + file,
// as runc's and cAdvisor's root stats take it), from the same files as
// Available: MemTotal minus (anon + file − inactive_file). It leaves out
// the kernel's own memory (slab, page tables, stacks) and the swap cache,
// which MemTotal − MemFree counts: on the swap node the two figures were
// 157 MiB apart, and a test that plans evictd's crossing must use this one.
func RootUsageAvailable(meminfoAndStat []byte) (int64, error) {
	want := map[string]int64{"MemTotal:": -1, "anon": -1, "file": -1, "inactive_file": -1}
	s := bufio.NewScanner(bytes.NewReader(meminfoAndStat))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) < 2 {
			continue
		}
		key := string(f[0])
		if _, ok := want[key]; !ok {
			continue
		}
		v, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("line %q: %w", s.Text(), err)
		}
		if key == "MemTotal:" {
			v <<= 10 // kB
		}
		want[key] = v
	}
	for k, v := range want {
		if v < 0 {
			return 0, fmt.Errorf("no %s in /proc/meminfo and the root memory.stat", k)
		}
	}
	return want["MemTotal:"] - (want["anon"] + want["file"] - want["inactive_file"]), nil
}
