// SPDX-License-Identifier: Apache-2.0

//go:build linux

package wakeup

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// capSysResourceFromStatus reads CAP_SYS_RESOURCE from /proc/self/status, a
// second opinion on hasCapSysResource's capget.
func capSysResourceFromStatus(t *testing.T) bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

func requirePSI(t *testing.T, file string) {
	t.Helper()
	_, err := os.Stat(file)
	cgrouptest.Need(t, err == nil, "PSI ("+file+"; boot with psi=1 if the kernel has CONFIG_PSI_DEFAULT_DISABLED)")
}

// TestPSITriggerArmsOnThisKernel arms a sub-second trigger on the system and
// on a cgroup's pressure file and checks the regime the kernel granted
// against this process's capabilities.
func TestPSITriggerArmsOnThisKernel(t *testing.T) {
	requirePSI(t, "/proc/pressure/memory")
	group := cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-psi")
	set, err := New(zaptest.NewLogger(t), clock.RealClock{}, Options{SystemPressureDirs: []string{"/proc/pressure", cgrouptest.UnifiedRoot}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	privileged := capSysResourceFromStatus(t)
	want := PSITrigger{Stall: 150 * time.Millisecond, Window: time.Second}

	for _, tc := range []struct{ name, file string }{
		{"system", "/proc/pressure/memory"},
		{"group", group.Path("memory.pressure")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := set.AddPSITrigger(tc.name, tc.file, want)
			if err != nil {
				t.Fatalf("arming %s: %v", tc.file, err)
			}
			st := p.Status()
			if !st.Active {
				t.Fatalf("status %+v, want active", st)
			}
			if p.Privileged() != privileged || st.Privileged != privileged {
				t.Errorf("Privileged() = %v, status %v; CapEff says CAP_SYS_RESOURCE = %v", p.Privileged(), st.Privileged, privileged)
			}
			wantSpec := "some 150000 1000000"
			if !privileged {
				wantSpec = "some 300000 2000000"
			}
			if p.Spec().String() != wantSpec {
				t.Errorf("armed %q, want %q", p.Spec(), wantSpec)
			}
			if readable := set.PressureReadable(tc.file); readable != privileged {
				t.Errorf("PressureReadable(%s) = %v, want %v", tc.file, readable, privileged)
			}
			// The whole group is off limits, not just the memory file.
			cpu := filepath.Join(filepath.Dir(tc.file), "cpu.pressure")
			if tc.name == "system" {
				cpu = "/proc/pressure/cpu"
			}
			if readable := set.PressureReadable(cpu); readable != privileged {
				t.Errorf("PressureReadable(%s) = %v, want %v", cpu, readable, privileged)
			}
		})
	}
	// The cgroup2 root is the system group too; other groups stay readable.
	if !privileged && set.PressureReadable(filepath.Join(cgrouptest.UnifiedRoot, "memory.pressure")) {
		t.Errorf("the cgroup2 root's memory.pressure is readable next to a system trigger")
	}
	if !set.PressureReadable(filepath.Join(cgrouptest.UnifiedRoot, "other", "memory.pressure")) {
		t.Errorf("an untriggered group is unreadable")
	}
	if !set.Active(SourcePSI) {
		t.Errorf("Active(psi) = false")
	}
}

func TestPSITriggerRefusedIsInactive(t *testing.T) {
	set, err := New(zaptest.NewLogger(t), clock.RealClock{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	tests := []struct {
		name, file string
		spec       PSITrigger
		mention    string
	}{
		{"no such file", filepath.Join(t.TempDir(), "memory.pressure"), PSITrigger{Stall: time.Second, Window: 2 * time.Second}, "no such file"},
		// A plain file takes the write; epoll then refuses it.
		{"not a pressure file", writeTemp(t, "x"), PSITrigger{Stall: time.Second, Window: 2 * time.Second}, "epoll_ctl"},
		{"invalid spec", "/proc/pressure/memory", PSITrigger{Stall: 3 * time.Second, Window: 2 * time.Second}, "stall 3s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := set.AddPSITrigger(tc.name, tc.file, tc.spec)
			st := p.Status()
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("AddPSITrigger = %v, want an error containing %q", err, tc.mention)
			}
			if st.Active || st.Reason == "" {
				t.Errorf("status %+v, want inactive with a reason", st)
			}
		})
	}
	if set.Active(SourcePSI) {
		t.Errorf("Active(psi) = true with only refused triggers")
	}
}

func writeTemp(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPSITriggerFiresUnderRealStall produces real memory stall in a cgroup
// (random reads of a file four times larger than the memory cgroup's limit,
// so every fault reclaims first) and checks that the trigger on the cgroup's
// memory.pressure wakes Wait, after swallowing its first event when
// unprivileged. It takes several seconds: unprivileged triggers are evaluated
// on the 2 s averaging clock and fire at most once per 2 s window.
func TestPSITriggerFiresUnderRealStall(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: needs ~10 s of real memory stall")
	}
	// On v1 the limit is the v1 memcg's and the PSI the unified group's, a
	// process in both; on v2 one group has both.
	memcg := cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-stall")
	group := memcg
	if !cgrouptest.V2() {
		group = cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-stall")
	}
	requirePSI(t, group.Path("memory.pressure"))
	memcg.SetMemoryLimit(t, 32<<20)
	file := cgrouptest.ColdFile(t, 128<<20)

	set, err := New(zaptest.NewLogger(t), clock.RealClock{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	p, err := set.AddPSITrigger("pod", group.Path("memory.pressure"), PSITrigger{Stall: 10 * time.Millisecond, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("armed %q, privileged=%v", p.Spec(), p.Privileged())

	c := cgrouptest.StartChild(t, memcg)
	if group != memcg {
		if err := group.Add(c.Pid()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.BeginStall(file, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 16*time.Second)
	defer cancel()
	for {
		w, err := set.Wait(ctx, 16*time.Second)
		if err != nil {
			t.Fatalf("no PSI wake-up after %v of stall: %v (status %+v)", time.Since(start), err, p.Status())
		}
		if w.Source == SourcePoll {
			continue
		}
		if w.Source != SourcePSI || w.Name != "pod" {
			t.Fatalf("woken by %s/%q, want psi/pod", w.Source, w.Name)
		}
		st := p.Status()
		t.Logf("PSI wake-up %v after the stall began; first events ignored: %d", time.Since(start), st.Ignored)
		wantIgnored := 1
		if p.Privileged() {
			wantIgnored = 0
		}
		if st.Ignored != wantIgnored {
			t.Errorf("ignored %d events before this wake-up, want %d", st.Ignored, wantIgnored)
		}
		break
	}
}

// TestPSITriggerGoneWithItsCgroup removes a triggered cgroup: the kernel
// reports POLLERR and the source must go inactive on its own.
func TestPSITriggerGoneWithItsCgroup(t *testing.T) {
	group := cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-gone")
	requirePSI(t, group.Path("memory.pressure"))
	set, err := New(zaptest.NewLogger(t), clock.RealClock{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	p, err := set.AddPSITrigger("gone", group.Path("memory.pressure"), PSITrigger{Stall: 100 * time.Millisecond, Window: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := group.Remove(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for p.Status().Active && time.Now().Before(deadline) {
		w, err := set.Wait(context.Background(), 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if w.Source == SourcePSI {
			t.Errorf("a removed cgroup's trigger delivered a wake-up")
		}
	}
	if st := p.Status(); st.Active || !strings.Contains(st.Reason, "gone") {
		t.Errorf("status after removing the cgroup = %+v, want inactive", st)
	}
	if set.Active(SourcePSI) {
		t.Errorf("Active(psi) = true with the only trigger gone")
	}
}

// newObservedSet makes a set whose Info and higher logs the test can count.
func newObservedSet(t *testing.T) (*Set, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	s, err := New(zap.New(core), clock.RealClock{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, logs
}

// TestPSITriggerRearmOnKernfs removes a triggered cgroup2 group and creates
// it again, with the kernel's POLLERR for the removal collected before
// Rearm and not: Rearm must arm on the new group's file either way, and a
// stale POLLERR must not turn the new trigger off.
func TestPSITriggerRearmOnKernfs(t *testing.T) {
	parent := cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-psi-rearm")
	group := parent.Sub(t, "kubepods")
	file := group.Path("memory.pressure")
	requirePSI(t, file)
	s, logs := newObservedSet(t)
	p, err := s.AddPSITrigger("kubepods", file, PSITrigger{Stall: 100 * time.Millisecond, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := p.Rearm(); again || err != nil {
		t.Fatalf("Rearm of a current trigger = %v, %v; want false, nil", again, err)
	}
	ino := func() uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(file, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	armedOn := ino()
	// rearmed checks that Rearm armed on the file the path names now.
	rearmed := func(what string) {
		t.Helper()
		again, err := p.Rearm()
		if st := p.Status(); !again || err != nil || !st.Active || st.Path != file {
			t.Fatalf("Rearm %s = %v, %v, %+v; want true, nil, active", what, again, err, st)
		}
		if p.ino != ino() || p.ino == armedOn {
			t.Fatalf("Rearm %s: armed on inode %d, the path names %d (the old group's was %d)", what, p.ino, ino(), armedOn)
		}
		armedOn = p.ino
	}

	// Removed, and the removal noticed by Rearm before the kernel's POLLERR
	// is collected: inactive while the group is missing.
	if err := group.Remove(); err != nil {
		t.Fatal(err)
	}
	if again, err := p.Rearm(); again || err == nil || p.Status().Active || !strings.Contains(p.Status().Reason, "removed") {
		t.Fatalf("Rearm with the group gone = %v, %v, %+v; want false, an error, inactive", again, err, p.Status())
	}
	if again, err := p.Rearm(); again || err == nil || s.Active(SourcePSI) {
		t.Fatalf("Rearm with the group still gone = %v, %v, %+v", again, err, p.Status())
	}
	group = parent.Sub(t, "kubepods")
	rearmed("once the group is back")

	// Removed and created again before anything was collected: only the
	// file's identity shows the trigger is dead.
	if err := group.Remove(); err != nil {
		t.Fatal(err)
	}
	group = parent.Sub(t, "kubepods")
	rearmed("after a silent re-creation")
	for _, w := range collect(t, s, 300*time.Millisecond) {
		if w.Source == SourcePSI {
			t.Errorf("woken by %+v after re-arming", w)
		}
	}
	if st := p.Status(); !st.Active {
		t.Fatalf("a stale POLLERR of the old trigger turned the new one off: %+v", st)
	}

	// Removed and the POLLERR collected first: the trigger goes inactive on
	// its own, and Rearm arms again once the group is back.
	if err := group.Remove(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); p.Status().Active && time.Now().Before(deadline); {
		collect(t, s, 100*time.Millisecond)
	}
	if st := p.Status(); st.Active || !strings.Contains(st.Reason, "gone") {
		t.Fatalf("after POLLERR: %+v, want inactive", st)
	}
	if again, err := p.Rearm(); again || err == nil {
		t.Fatalf("Rearm with the group gone after POLLERR = %v, %v; want false, an error", again, err)
	}
	parent.Sub(t, "kubepods")
	rearmed("after POLLERR, once the group is back")
	if n := logs.FilterMessage("wake-up source re-armed").Len(); n != 3 {
		t.Errorf("logged %d re-arms, want 3: %v", n, logs.All())
	}
	if !p.Privileged() && s.PressureReadable(file) {
		t.Errorf("the re-armed unprivileged trigger's group is readable")
	}

	// Close drops the trigger, its status and its hold on the group.
	p.Close()
	if len(s.Statuses()) != 0 || s.Active(SourcePSI) || !s.PressureReadable(file) {
		t.Errorf("after Close: statuses %+v, readable %v", s.Statuses(), s.PressureReadable(file))
	}
	if again, err := p.Rearm(); again || err != nil {
		t.Errorf("Rearm after Close = %v, %v; want false, nil", again, err)
	}
}

// A failed attempt is repeated only once the path names another file: a
// missing file is tried when it appears, a file that refused the trigger is
// not tried again, and a replacement is.
func TestPSITriggerRearmAfterAFailedAttempt(t *testing.T) {
	group := cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-psi-retry")
	requirePSI(t, group.Path("memory.pressure"))
	s, logs := newObservedSet(t)
	dir := t.TempDir()
	link, plain := filepath.Join(dir, "memory.pressure"), filepath.Join(dir, "plain")
	p, err := s.AddPSITrigger("kubepods", link, PSITrigger{Stall: time.Second, Window: 2 * time.Second})
	if err == nil || p.Status().Active {
		t.Fatalf("AddPSITrigger on a missing file = %v, %+v; want an error, inactive", err, p.Status())
	}
	if again, err := p.Rearm(); again || err == nil {
		t.Fatalf("Rearm of a missing file = %v, %v; want false, an error", again, err)
	}
	// A plain file takes the trigger's write and is refused by epoll.
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(plain, link); err != nil {
		t.Fatal(err)
	}
	if again, err := p.Rearm(); again || err == nil || !strings.Contains(err.Error(), "epoll_ctl") {
		t.Fatalf("Rearm on a plain file = %v, %v; want false, an epoll_ctl error", again, err)
	}
	if err := os.Truncate(plain, 0); err != nil {
		t.Fatal(err)
	}
	if again, err := p.Rearm(); again || err == nil || !strings.Contains(err.Error(), "epoll_ctl") {
		t.Fatalf("Rearm on the same plain file = %v, %v; want false, the earlier error", again, err)
	}
	if b, err := os.ReadFile(plain); err != nil || len(b) != 0 {
		t.Fatalf("Rearm tried the file that refused the trigger again (it holds %q, %v)", b, err)
	}
	// The path now names a pressure file: armed, and logged as active (a
	// first arming, not a re-arm).
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(group.Path("memory.pressure"), link); err != nil {
		t.Fatal(err)
	}
	if again, err := p.Rearm(); !again || err != nil || !p.Status().Active {
		t.Fatalf("Rearm on a pressure file = %v, %v, %+v; want true, nil, active", again, err, p.Status())
	}
	if n, m := logs.FilterMessage("wake-up source active").Len(), logs.FilterMessage("wake-up source re-armed").Len(); n != 1 || m != 0 {
		t.Errorf("logged %d activations and %d re-arms, want 1 and 0: %v", n, m, logs.All())
	}
	if again, err := p.Rearm(); again || err != nil {
		t.Errorf("Rearm of the current trigger = %v, %v; want false, nil", again, err)
	}
}
