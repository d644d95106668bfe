// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// daemonSetMemoryLimit is the memory limit of deploy/daemonset.yaml's
// container (TestManifestContract pins the limit and GOMEMLIMIT under it).
const daemonSetMemoryLimit = 64 << 20

// TestRunLocksItsMemory runs `evictd run` as its own process, as root (as
// in the DaemonSet, with CAP_IPC_LOCK), and reads what the kernel says of
// it: its memory is locked (VmLck > 0, and resident pages locked in
// smaps_rollup), yet its resident set stays well inside the DaemonSet's
// memory limit because only touched pages are locked (MCL_ONFAULT; without
// it the kernel would fault in the Go runtime's reservations). The agent
// has no API server to reach, so it stays waiting for its informers.
func TestRunLocksItsMemory(t *testing.T) {
	cgrouptest.Need(t, os.Geteuid() == 0, "root, for CAP_IPC_LOCK to lock memory without RLIMIT_MEMLOCK's bound")

	started, logs, pid := startEvictd(t, []string{"GOMEMLIMIT=56MiB"}, "--node-name=memlock-test")
	status := procKiB(t, fmt.Sprintf("/proc/%d/status", pid), "VmLck", "VmRSS")
	rollup := procKiB(t, fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Locked", "Rss")
	t.Logf("evictd: VmLck %d KiB (mapped and locked), Locked %d KiB of Rss %d KiB (resident), VmRSS %d KiB",
		status["VmLck"], rollup["Locked"], rollup["Rss"], status["VmRSS"])
	if status["VmLck"] == 0 {
		t.Errorf("VmLck %d kB: evictd run did not lock its memory", status["VmLck"])
	}
	if rollup["Locked"] == 0 || rollup["Locked"] > rollup["Rss"] {
		t.Errorf("smaps_rollup: Locked %d kB of Rss %d kB; want resident pages locked", rollup["Locked"], rollup["Rss"])
	}
	// Locked pages count against the container's memory limit; MCL_ONFAULT
	// keeps them to what evictd touches (this test binary: about 30 MiB).
	// Without it the kernel faults in every mapping: 110 MiB measured here,
	// and the container would be OOM-killed as it starts.
	if rss := status["VmRSS"] << 10; rss >= daemonSetMemoryLimit {
		t.Errorf("VmRSS %d MiB with its memory locked; want it within the DaemonSet's %d MiB limit", rss>>20, daemonSetMemoryLimit>>20)
	}
	if l := logs.find("memory locked: evictd's pages stay in RAM once touched"); l == nil {
		t.Errorf("no log line saying the memory is locked; logs: %v", logs.lines())
	}
	if started["memoryLocked"] != true {
		t.Errorf("evictd starting: memoryLocked = %v, want true", started["memoryLocked"])
	}
	code, body, err := httpGet("http://" + started["metricsAddress"].(string) + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d, %v", code, err)
	}
	if !strings.Contains(body, "\nevictd_memory_locked 1\n") {
		t.Errorf("/metrics lacks evictd_memory_locked 1")
	}
}

// procKiB reads "Key:   N kB" lines of a /proc file.
func procKiB(t *testing.T, path string, keys ...string) map[string]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	got := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[2] != "kB" || !want[strings.TrimSuffix(fields[0], ":")] {
			continue
		}
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		got[strings.TrimSuffix(fields[0], ":")] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, ok := got[k]; !ok {
			t.Fatalf("%s has no %s line", path, k)
		}
	}
	return got
}

// TestLockMemoryFlag: the lock is on unless --lock-memory=false.
func TestLockMemoryFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--lock-memory=false"}, false},
		{[]string{"--lock-memory"}, true},
	} {
		var out, errb bytes.Buffer
		opts, _, _, code, ok := parseRunFlags(append([]string{"--node-name=n1"}, tc.args...), &out, &errb)
		if !ok {
			t.Fatalf("%v: exit %d, stderr %q", tc.args, code, errb.String())
		}
		if opts.LockMemory != tc.want {
			t.Errorf("%v: LockMemory = %v, want %v", tc.args, opts.LockMemory, tc.want)
		}
	}
}
