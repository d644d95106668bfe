// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/test/vmnode/vmapi"
)

func TestWatchCrossingTimesTheFallAfterTheTrigger(t *testing.T) {
	dir := t.TempDir()
	meminfo := filepath.Join(dir, "meminfo")
	stat := filepath.Join(dir, "memory.stat")
	// 600 MiB free + 100 MiB inactive_file = 700 MiB available; the trigger
	// takes free down to 100 MiB: 200 MiB available, below the 300 MiB level.
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(meminfo, "MemTotal:        2048000 kB\nMemFree:          614400 kB\n")
	write(stat, "anon 1\ninactive_file 104857600\nactive_file 1\n")
	fall := filepath.Join(dir, "fall")
	write(fall, "MemTotal:        2048000 kB\nMemFree:          102400 kB\n")
	// Generous: the trigger's 50 ms sleep and its two processes are all
	// the watch waits for.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Each read is stamped one tick after the one before, whenever the
	// host ran it: the crossing's bracket is then read in reads, not in the
	// host's speed.
	const tick = time.Millisecond
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	reads := 0
	clock := func() time.Time {
		reads++
		return start.Add(time.Duration(reads) * tick)
	}
	c, err := watchCrossing(ctx, []string{meminfo, stat}, 300<<20, time.Millisecond, clock,
		// Rewritten in place, same length, without truncation: a read never
		// sees the file empty, as with /proc. The 50 ms are for reads
		// before the step, not a bound on anything.
		[]string{"/bin/sh", "-c", "sleep 0.05; cat " + fall + " 1<>" + meminfo + "; echo stepped"})
	if err != nil {
		t.Fatal(err)
	}
	// Before is the first read's (700 MiB), Available the crossing read's:
	// the step's 200 MiB, which only a read after the trigger can see.
	if c.Before != 700<<20 || c.Available != 200<<20 {
		t.Errorf("before %d, available %d; want %d and %d", c.Before, c.Available, 700<<20, 200<<20)
	}
	if strings.TrimSpace(c.Trigger) != "stepped" {
		t.Errorf("trigger output %q", c.Trigger)
	}
	// The bracket is two reads in a row: the last read above the level and
	// the first below it, the crossing read being the last of all.
	above, at := time.Unix(0, c.LastAboveUnixNano).UTC(), time.Unix(0, c.AtUnixNano).UTC()
	last := start.Add(time.Duration(reads) * tick)
	if c.Reads < 2 || c.Reads != reads || !at.Equal(last) || !above.Equal(at.Add(-tick)) {
		t.Errorf("last above %v, at %v after %d reads (%d stamped, the last at %v): want the crossing at the last read and the last above the read before it",
			above, at, c.Reads, reads, last)
	}
}

func TestWatchCrossingErrors(t *testing.T) {
	dir := t.TempDir()
	meminfo := filepath.Join(dir, "meminfo")
	stat := filepath.Join(dir, "memory.stat")
	os.WriteFile(meminfo, []byte("MemFree: 614400 kB\n"), 0o644)
	os.WriteFile(stat, []byte("inactive_file 0\n"), 0o644)
	// The watch ends once the trigger has said its word (it leaves a mark
	// after): the error must quote it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mark := filepath.Join(dir, "said")
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(mark); err == nil {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err := watchCrossing(ctx, []string{meminfo, stat}, 300<<20, time.Millisecond, time.Now, []string{"/bin/sh", "-c", `echo nothing; : >"$0"`, mark})
	if err == nil || !strings.Contains(err.Error(), "stayed at or above 314572800 (last 629145600") || !strings.Contains(err.Error(), "nothing") {
		t.Errorf("no crossing: err %v, want one naming the level, the last value and the trigger's output", err)
	}
	os.WriteFile(stat, []byte("inactive_file x\n"), 0o644)
	if _, err := watchCrossing(context.Background(), []string{meminfo, stat}, 1, time.Millisecond, time.Now, nil); err == nil || !strings.Contains(err.Error(), "inactive_file x") {
		t.Errorf("malformed memory.stat: err %v, want one naming the line", err)
	}
	if _, err := watchCrossing(context.Background(), []string{filepath.Join(dir, "missing")}, 1, time.Millisecond, time.Now, nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: err %v", err)
	}
}

func TestCrossingUsageAndOutput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"crossing", "--below=0"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "must be positive (got 0") {
		t.Errorf("--below=0: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"crossing", "--below=1", "--interval=x"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "interval") {
		t.Errorf("--interval=x: exit %d, stderr %q", code, stderr.String())
	}
	// On a host without the guest's files the watch fails, once, in words.
	if _, err := os.Stat("/sys/fs/cgroup/memory.stat"); err != nil {
		stderr.Reset()
		if code := run([]string{"crossing", "--below=1", "--timeout=1s"}, &stdout, &stderr); code != exitFail || !strings.Contains(stderr.String(), "memory.stat") {
			t.Errorf("no memory.stat: exit %d, stderr %q", code, stderr.String())
		}
	}
	var c vmapi.Crossing
	if err := json.Unmarshal([]byte(`{"lastAboveUnixNano":1,"atUnixNano":2,"available":3,"before":4,"reads":5}`), &c); err != nil || c.Reads != 5 {
		t.Errorf("wire format: %+v %v", c, err)
	}
}
