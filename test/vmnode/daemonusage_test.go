// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"strings"
	"testing"
)

// sampleOut is daemonSampleScript's output as the guest prints it: a
// process whose comm holds a space and a parenthesis, its stat line as the
// kernel writes it (utime 1234, stime 566).
func sampleOut(uptime, utime string, rssKB string) string {
	return "pid 412\n" + uptime + " 170.33\n" +
		"412 (systemd-oomd) x) S 1 412 412 0 -1 4194560 1690 0 3 0 " + utime + " 566 0 0 20 0 1 0 611 21766144 2315 18446744073709551615 1 1 0 0 0 0 0 4096 16898 0 0 0 17 1 0 0 0 0 0\n" +
		"VmHWM:\t    9700 kB\nVmRSS:\t    " + rssKB + " kB\nRssAnon:\t    1024 kB\nRssFile:\t    7236 kB\n"
}

func TestParseDaemonSample(t *testing.T) {
	s, err := ParseDaemonSample(sampleOut("100.00", "1234", "9260"))
	if err != nil {
		t.Fatal(err)
	}
	want := DaemonSample{PID: 412, Uptime: 100, CPUTicks: 1800, RSS: 9260 << 10, HWM: 9700 << 10, Anon: 1024 << 10, File: 7236 << 10}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	later, err := ParseDaemonSample(sampleOut("120.00", "1264", "9300"))
	if err != nil {
		t.Fatal(err)
	}
	// 30 ticks (0.3 s) over 20 s: 1.5 % of a core.
	if c, ok := CPUShare(s, later); !ok || c < 1.4999 || c > 1.5001 {
		t.Errorf("CPUShare = %v %v, want 1.5", c, ok)
	}
	restarted := later
	restarted.PID = 999
	if _, ok := CPUShare(s, restarted); ok {
		t.Error("CPUShare across two processes: want false")
	}
	for _, bad := range []string{
		"",
		"no process named earlyoom\n",
		strings.Replace(sampleOut("100.00", "1234", "9260"), "pid 412", "pid x", 1),
		strings.Replace(sampleOut("100.00", "1234", "9260"), " 1234 566 ", " 1234 5x6 ", 1),
		strings.Replace(sampleOut("100.00", "1234", "9260"), "VmRSS:\t    9260 kB\n", "", 1),
		strings.Replace(sampleOut("100.00", "1234", "9260"), "9260 kB", "9260 MB", 1),
		"pid 412\n100.00 170.33\n412 (evictd) S 1 2 3\n",
	} {
		if _, err := ParseDaemonSample(bad); err == nil {
			t.Errorf("ParseDaemonSample(%q): want an error", bad)
		}
	}
}

func TestOverheadTable(t *testing.T) {
	idle, _ := ParseDaemonSample(sampleOut("100.00", "1234", "9260"))
	idleEnd, _ := ParseDaemonSample(sampleOut("120.00", "1236", "9260"))
	end, _ := ParseDaemonSample(sampleOut("220.00", "1336", "9300"))
	runs := []PeerRun{
		{Config: "systemd-oomd", Scenario: "leak", Usage: &DaemonUsage{Daemon: "systemd-oomd", Idle: idle, IdleEnd: idleEnd, End: end, Pods: 7}},
		{Config: "kubelet", Scenario: "leak"},
		{Config: "earlyoom", Scenario: "leak", Usage: &DaemonUsage{Daemon: "earlyoom", Unreadable: "no process named earlyoom"}},
		{Config: "evictd", Scenario: "leak", Usage: &DaemonUsage{Daemon: "evictd", Idle: idle, IdleEnd: idleEnd, Pods: 110, EndUnreadable: "the guest did not answer"}},
		{Config: "evictd", Scenario: "leak", Usage: &DaemonUsage{Daemon: "evictd", Idle: idle, IdleEnd: idleEnd, Pods: 109}},
	}
	lines := strings.Split(strings.TrimSpace(OverheadTable(runs)), "\n")
	if len(lines) != 5 {
		t.Fatalf("table:\n%s", strings.Join(lines, "\n"))
	}
	for _, w := range []string{"systemd-oomd", " 7 ", "9.0 (1.0/7.1)", "9.5", "0.10", "1.00"} {
		if !strings.Contains(lines[1], w) {
			t.Errorf("row %q lacks %q", lines[1], w)
		}
	}
	if !strings.Contains(lines[2], "unreadable: no process named earlyoom") {
		t.Errorf("row %q", lines[2])
	}
	// The idle figures stand when the run's end could not be read.
	for _, w := range []string{" 110 ", "9.0 (1.0/7.1)", "0.10", "unread: the guest did not answer"} {
		if !strings.Contains(lines[3], w) {
			t.Errorf("row %q lacks %q", lines[3], w)
		}
	}
	// Logged before the run's end: its columns are empty, not a restart.
	if f := strings.Fields(lines[4]); strings.Contains(lines[4], "restarted") || f[len(f)-1] != "-" || f[len(f)-3] != "-" {
		t.Errorf("row %q: want - for the run's end, not yet read", lines[4])
	}
}
