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

	"go.uber.org/zap/zaptest"
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
	memcg := cgrouptest.NewMemoryCgroup(t, "evictd-wakeup-stall")
	group := cgrouptest.NewUnifiedCgroup(t, "evictd-wakeup-stall")
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

	c := cgrouptest.StartChild(t, memcg, group)
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
	deadline := time.Now().Add(3 * time.Second)
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
