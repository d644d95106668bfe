// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/test/internal/prereq"
	"github.com/evictd/evictd/test/internal/proc"
	"github.com/evictd/evictd/test/internal/stale"
)

// hogEnv makes the test binary act as a memory hog (see TestMain): it
// touches that many MiB, then sleeps.
const hogEnv = "NODESIM_TEST_HOG_MIB"

func TestMain(m *testing.M) {
	if v := os.Getenv(hogEnv); v != "" {
		mib, _ := strconv.Atoi(v)
		mem, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			os.Exit(3)
		}
		for i := 0; i < len(mem); i += os.Getpagesize() {
			mem[i] = 1
		}
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseOOMControl(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    oomControl
		wantErr string
	}{
		{name: "idle", in: "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", want: oomControl{}},
		{name: "killed", in: "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", want: oomControl{kills: 3}},
		{name: "under OOM", in: "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n", want: oomControl{underOOM: true}},
		{name: "kernel before 4.13", in: "oom_kill_disable 0\nunder_oom 0\n", want: oomControl{}},
		{name: "empty", in: "", wantErr: "no under_oom"},
		{name: "no value", in: "under_oom\n", wantErr: `malformed line "under_oom"`},
		{name: "bad value", in: "under_oom 0\noom_kill x\n", wantErr: `bad value "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOOMControl([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestUnescapeMountPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/a/b", "/a/b"},
		{`/a\040b`, "/a b"},
		{`/tab\011x`, "/tab\tx"},
		{`/bad\09`, `/bad\09`},
		{`/end\04`, `/end\04`},
	}
	for _, tt := range tests {
		if got := unescapeMountPath(tt.in); got != tt.want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRealCgroups runs processes in real cgroups of the host's version, made
// by cgroupV1 or cgroupV2 (with containerd/cgroups): a limit set through the
// library holds, a process over it is OOM-killed and counted, and remove
// clears out a tree that still has processes in it.
func TestRealCgroups(t *testing.T) {
	prereq.Require(t, Supported(""))
	cg, err := newCgroups(defaultCgroupFS)
	if err != nil {
		t.Fatal(err)
	}
	root, err := cg.create("/" + stale.Name(cgroupPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.remove(root, 10*time.Second); err != nil {
			t.Error(err)
		}
	})

	tests := []struct {
		name      string
		limitMiB  int64
		hogMiB    int
		wantKills uint64
	}{
		{name: "within the limit", limitMiB: 64, hogMiB: 16, wantKills: 0},
		{name: "over the limit", limitMiB: 32, hogMiB: 96, wantKills: 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := cg.create(path.Join(root.rel, "c"+strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.setLimits(tt.limitMiB<<20, 64); err != nil {
				t.Fatal(err)
			}
			rel := c.rel
			for file, want := range map[string]int64{
				filepath.Join(cg.memoryDir(rel), cgrouptest.LimitFile): tt.limitMiB << 20,
				filepath.Join(cg.pidsDir(rel), "pids.max"):             64,
			} {
				b, err := os.ReadFile(file)
				if got, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil || got != want {
					t.Fatalf("%s = %q, %v; want %d", file, b, err, want)
				}
			}
			cmd := exec.Command("/bin/sh", JoinArgs(cg.procsFiles(rel), os.Args[0])...)
			cmd.Env = append(os.Environ(), hogEnv+"="+strconv.Itoa(tt.hogMiB))
			p, err := proc.Start(cmd, clock.RealClock{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Stop(0) })
			if err := awaitJoin(p, cg.procsFiles(rel)); err != nil {
				t.Fatal(err)
			}
			var kills uint64
			usage := int64(0)
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if kills, err = cg.oomKills(rel); err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(filepath.Join(cg.memoryDir(rel), cgrouptest.UsageFile))
				usage, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				if kills > 0 || usage >= int64(tt.hogMiB)<<20 {
					break
				}
			}
			if kills != tt.wantKills {
				t.Fatalf("oom_kill = %d, want %d (usage %d MiB)", kills, tt.wantKills, usage>>20)
			}
			if tt.wantKills > 0 {
				select {
				case <-p.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("OOM-killed process still running")
				}
			} else if p.Exited() {
				t.Fatal("process within its limit exited")
			}
		})
	}

	// remove must cope with a live process deep in the tree, in a cgroup
	// it holds no handle for.
	deep := path.Join(root.rel, "deep", "er")
	if _, err := cg.create(deep); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", JoinArgs(cg.procsFiles(deep), os.Args[0])...)
	cmd.Env = append(os.Environ(), hogEnv+"=64")
	p, err := proc.Start(cmd, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	if err := awaitJoin(p, cg.procsFiles(deep)); err != nil {
		t.Fatal(err)
	}
	// A process that holds memory takes longer to leave once killed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(cg.memoryDir(deep), cgrouptest.UsageFile))
		if usage, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); usage >= 64<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hog in %s never reached 64 MiB", deep)
		}
	}
	began := time.Now()
	if err := cg.remove(root, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("removing a tree with a live 64 MiB process took %s", time.Since(began))
	for _, d := range []string{cg.memoryDir(root.rel), cg.pidsDir(root.rel)} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", d, err)
		}
	}
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("process in a removed cgroup still running")
	}
}

func TestHostRoot(t *testing.T) {
	prereq.Require(t, Supported(""))
	tests := []struct {
		name string
		disk int64
	}{
		{"plain directory", 0},
		{"own tmpfs", 8 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := newHostRoot(t.TempDir(), tt.disk, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.remove() })
			if target, err := os.Readlink(filepath.Join(h.root, "proc")); err != nil || target != "/proc" {
				t.Errorf("proc link = %q, %v", target, err)
			}
			size, err := h.capacity()
			if err != nil {
				t.Fatal(err)
			}
			if tt.disk > 0 && size != tt.disk {
				t.Errorf("capacity %d, want the tmpfs size %d", size, tt.disk)
			}
			mounts, err := mountsUnder(h.root)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(mounts), map[bool]int{true: 1, false: 0}[tt.disk > 0]; got != want {
				t.Errorf("mounts under the host root: %v, want %d", mounts, want)
			}
			if err := h.remove(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(h.root); !os.IsNotExist(err) {
				t.Errorf("host root still there: %v", err)
			}
			if _, err := os.Stat("/proc/self"); err != nil {
				t.Fatalf("removing the host root harmed /proc: %v", err)
			}
		})
	}
}

// BenchmarkOOMKillRead measures what one read of a cgroup's OOM-kill counter
// costs, as the runner does for each container and pod every
// OOMPollInterval: our read of memory.oom_control against the library's
// Stat, which has the same counter (MemoryOomControl.OomKill) but reads
// memory.stat and the usage, limit and failcnt files of memory, memsw and
// kmem with it.
func BenchmarkOOMKillRead(b *testing.B) {
	prereq.Require(b, Supported(""))
	cg, err := newCgroupV1(defaultCgroupFS)
	if err != nil {
		b.Fatal(err)
	}
	c, err := cg.create("/" + stale.Name(cgroupPrefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cg.remove(c, 10*time.Second); err != nil {
			b.Error(err)
		}
	})
	b.Run("own", func(b *testing.B) {
		for b.Loop() {
			if _, err := cg.oomKills(c.rel); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library-Stat", func(b *testing.B) {
		memOnly, err := cgroup1.Load(cgroup1.StaticPath(c.rel), cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) {
			return []cgroup1.Subsystem{cgroup1.NewMemory(defaultCgroupFS, cgroup1.OptionalSwap())}, nil
		}))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			st, err := memOnly.Stat()
			if err != nil || st.MemoryOomControl == nil {
				b.Fatalf("Stat: %v, %+v", err, st)
			}
		}
	})
}
