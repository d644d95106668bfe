// SPDX-License-Identifier: Apache-2.0

package kubeletwatch

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// statLine is a /proc/PID/stat line as Linux writes it (proc(5), the 52
// fields of 3.5 on): PID, the command name in parentheses, then numbers,
// the start time the 22nd field.
func statLine(pid int, comm string, start uint64) []byte {
	rest := make([]string, 52-2)
	for i := range rest {
		rest[i] = strconv.Itoa(i * 7)
	}
	rest[0] = "S"
	rest[22-3] = strconv.FormatUint(start, 10)
	return []byte(fmt.Sprintf("%d (%s) %s\n", pid, comm, strings.Join(rest, " ")))
}

// FuzzParseStartTime: a kubelet's start time, by which evictd tells a
// restarted kubelet (and reads its configuration again), whatever the
// process calls itself: a command name may hold spaces, parentheses and
// digits, and must not move the fields after it. Any other line is one
// error that names the line or the field it could not read.
func FuzzParseStartTime(f *testing.F) {
	f.Add([]byte("1 (k) S 1 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 x 1"), "kubelet", uint64(4242))
	f.Add([]byte("123 (kubelet) S 1 2 3"), "ku (be) let", uint64(0))
	f.Add([]byte("123 kubelet S 1"), ") S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 (", uint64(1<<63))
	f.Add(statLine(7, "kubelet", 99), "a)b) 1 2", ^uint64(0))
	// 19 fields after the name, one short: the fuzzer's find against a
	// bound off by one.
	f.Add([]byte(")0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"), "0", uint64(4242))
	f.Fuzz(func(t *testing.T, raw []byte, comm string, start uint64) {
		if got, err := ParseStartTime(statLine(4321, comm, start)); err != nil || got != start {
			t.Fatalf("ParseStartTime of a process named %q started at %d: %d, %v", comm, start, got, err)
		}
		got, err := ParseStartTime(raw)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "stat ") || !strings.Contains(msg, `"`) {
				t.Fatalf("ParseStartTime(%q): error %q does not quote what it could not read", raw, msg)
			}
			return
		}
		// What it read is a field after the command name's last ')'.
		after := raw[bytes.LastIndexByte(raw, ')')+1:]
		found := false
		for _, fld := range bytes.Fields(after) {
			if n, err := strconv.ParseUint(string(fld), 10, 64); err == nil && n == got {
				found = true
			}
		}
		if !found {
			t.Fatalf("ParseStartTime(%q) = %d, which is no field after the command name", raw, got)
		}
	})
}
