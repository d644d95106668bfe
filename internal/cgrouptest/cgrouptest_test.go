// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	RunChildIfRequested()
	os.Exit(m.Run())
}

// recorder stands in for a test so that Need's verdict can be observed
// without ending the real test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Skipf(f string, args ...any)  { r.skipped = fmt.Sprintf(f, args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }

func TestNeed(t *testing.T) {
	tests := []struct {
		name               string
		ci                 string
		ok                 bool
		wantSkip, wantFail bool
	}{
		{name: "met in CI", ci: "true", ok: true},
		{name: "met outside CI", ci: "", ok: true},
		{name: "missing outside CI", ci: "", wantSkip: true},
		{name: "missing in CI", ci: "true", wantFail: true},
		{name: "CI=false is not CI", ci: "false", wantSkip: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{}
			Need(r, tc.ok, "a unicorn")
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.wantSkip, tc.wantFail)
			}
			for _, msg := range []string{r.skipped, r.failed} {
				if msg != "" && !strings.Contains(msg, "a unicorn") {
					t.Errorf("message %q does not name what is missing", msg)
				}
			}
		})
	}
}

// fakeRoot makes a directory holding the named files.
func fakeRoot(t *testing.T, files ...string) string {
	dir := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestHierarchyChecks(t *testing.T) {
	v1 := fakeRoot(t, "cgroup.event_control", "memory.usage_in_bytes", "cgroup.procs")
	v2 := fakeRoot(t, "cgroup.controllers", "cgroup.procs", "memory.pressure")
	v2mem := fakeRoot(t, "cgroup.procs")
	if err := os.WriteFile(filepath.Join(v2mem, "cgroup.controllers"), []byte("cpu io memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		check   func(string, int) (bool, string)
		root    string
		euid    int
		wantOK  bool
		mention string
	}{
		{"v1 as root", memoryV1, v1, 0, true, ""},
		{"v1 not root", memoryV1, v1, 1000, false, "root"},
		{"v1 check on a cgroup2 root", memoryV1, v2, 0, false, "v1 memory controller at " + v2},
		{"v1 missing", memoryV1, filepath.Join(v1, "nope"), 0, false, filepath.Join(v1, "nope")},
		{"v2 as root", unified, v2, 0, true, ""},
		{"v2 not root", unified, v2, 1000, false, "root"},
		{"v2 check on a v1 root", unified, v1, 0, false, "cgroup2 hierarchy at " + v1},
		{"v2 memory as root", memoryV2, v2mem, 0, true, ""},
		{"v2 memory not root", memoryV2, v2mem, 1000, false, "root"},
		{"v2 without the memory controller", memoryV2, v2, 0, false, "memory controller in " + filepath.Join(v2, "cgroup.controllers")},
		{"v2 memory check on a v1 root", memoryV2, v1, 0, false, "cgroup2 hierarchy at " + v1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, what := tc.check(tc.root, tc.euid)
			if ok != tc.wantOK || !strings.Contains(what, tc.mention) || (ok && what != "") {
				t.Errorf("= %v, %q; want %v naming %q", ok, what, tc.wantOK, tc.mention)
			}
		})
	}
}

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line    string
		want    command
		wantErr string
	}{
		{line: "touch 64", want: command{op: "touch", mib: 64}},
		{line: "touch 8 1048576 /sys/fs/cgroup/memory/a b/memory.usage_in_bytes", want: command{op: "touch", mib: 8, threshold: 1 << 20, file: "/sys/fs/cgroup/memory/a b/memory.usage_in_bytes"}},
		{line: "stall 1500 /tmp/cold file", want: command{op: "stall", stall: 1500 * time.Millisecond, file: "/tmp/cold file"}},
		{line: "touch", wantErr: `"" is not a positive number of MiB`},
		{line: "touch -3", wantErr: `"-3" is not a positive`},
		{line: "touch 4x", wantErr: `"4x"`},
		{line: "touch 4 100", wantErr: "no file to watch"},
		{line: "touch 4 lots /f", wantErr: `threshold "lots"`},
		{line: "touch 4 0 /f", wantErr: `threshold "0"`},
		{line: "stall 0 /f", wantErr: `"0" is not a positive number of milliseconds`},
		{line: "stall 100", wantErr: "names no file"},
		{line: "jump 3", wantErr: `unknown command "jump 3"`},
		{line: "", wantErr: `unknown command ""`},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			got, err := parseCommand(tc.line)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseCommand = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseCommand = %+v, %v; want %+v", got, err, tc.want)
			}
			if s := got.String(); s != tc.line {
				t.Errorf("String() = %q, want the line back", s)
			}
		})
	}
}

func TestParseTouched(t *testing.T) {
	tests := []struct {
		line    string
		want    Touched
		wantErr string
	}{
		{line: "touched 10 20 15 4096", want: Touched{Start: 10, End: 20, Crossed: 15, Last: 4096}},
		{line: "touched 10 20 0 0", want: Touched{Start: 10, End: 20}},
		{line: "error mmap 64 MiB: cannot allocate memory", wantErr: "child: mmap 64 MiB"},
		{line: "touched 10 20 15", wantErr: "want \"touched START END CROSSED LAST\""},
		{line: "ok", wantErr: `answered "ok"`},
		{line: "touched 10 x 15 0", wantErr: "field 2 is not a number"},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			got, err := parseTouched(tc.line)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseTouched = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || got.String() != tc.line {
				t.Fatalf("parseTouched = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestServe runs the child's command loop in this process on small inputs.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "usage")
	if err := os.WriteFile(counter, []byte("5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, bytes.Repeat([]byte{7}, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		in    string
		check func(t *testing.T, answers []string)
	}{
		{"touch", "touch 1\n", func(t *testing.T, a []string) {
			tc, err := parseTouched(a[0])
			if err != nil || tc.Start <= 0 || tc.End < tc.Start || tc.Crossed != 0 || tc.Last != 0 {
				t.Errorf("%+v, %v; want a bracketed touch without a crossing", tc, err)
			}
		}},
		{"watch reaching its threshold", "touch 1 5000 " + counter + "\n", func(t *testing.T, a []string) {
			tc, err := parseTouched(a[0])
			if err != nil || tc.Crossed < tc.Start || tc.Crossed > tc.End || tc.Last != 5000 {
				t.Errorf("%+v, %v; want a crossing within the touch, last read 5000", tc, err)
			}
		}},
		{"watch below its threshold", "touch 1 5001 " + counter + "\n", func(t *testing.T, a []string) {
			tc, err := parseTouched(a[0])
			if err != nil || tc.Crossed != 0 || tc.Last != 5000 {
				t.Errorf("%+v, %v; want no crossing, last read 5000", tc, err)
			}
		}},
		{"watching a file without a number", "touch 1 10 " + garbage + "\n", func(t *testing.T, a []string) {
			if !strings.HasPrefix(a[0], "error ") || !strings.Contains(a[0], `"many\n"`) {
				t.Errorf("answer %q; want an error quoting the file's content", a[0])
			}
		}},
		{"bad command, then a good one", "touch lots\ntouch 1\n", func(t *testing.T, a []string) {
			if len(a) != 2 || !strings.Contains(a[0], `"lots"`) || !strings.HasPrefix(a[1], "touched ") {
				t.Errorf("answers %q; want an error naming the value, then a touch", a)
			}
		}},
		{"stall, then a touch", "stall 30 " + small + "\ntouch 1\n", func(t *testing.T, a []string) {
			if len(a) != 2 || a[0] != "stalling" || !strings.HasPrefix(a[1], "touched ") {
				t.Errorf("answers %q; want stalling, then a touch", a)
			}
		}},
		{"stall on a missing file", "stall 30 " + filepath.Join(dir, "gone") + "\n", func(t *testing.T, a []string) {
			if !strings.HasPrefix(a[0], "error ") || !strings.Contains(a[0], filepath.Join(dir, "gone")) {
				t.Errorf("answer %q; want an error naming the file", a[0])
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			start := time.Now()
			if code := serve(strings.NewReader(tc.in), &out); code != 0 {
				t.Fatalf("serve exited %d", code)
			}
			answers := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(answers) != strings.Count(tc.in, "\n") {
				t.Fatalf("answers %q to %q; want one a command", answers, tc.in)
			}
			tc.check(t, answers)
			if strings.HasPrefix(tc.in, "stall 30 ") && len(answers) == 2 && time.Since(start) < 30*time.Millisecond {
				t.Errorf("the stall ended after %v, before its 30ms", time.Since(start))
			}
		})
	}
}

func TestChildDir(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"pod1", "/cg/pod1"},
		{"evictd-test-1-2", "/cg/evictd-test-1-2"},
		{"", ""},
		{".", ""},
		{"..", ""},
		{"a/b", ""},
		{"../escape", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := childDir("/cg", tc.name)
			if got != tc.want || (err != nil) != (tc.want == "") {
				t.Fatalf("childDir(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.name)) {
				t.Errorf("error %q does not name %q", err, tc.name)
			}
		})
	}
}

// TestChildTouchChargesItsCgroup touches memory from a child in a real
// memory cgroup and checks the charge, the watch and the exit.
func TestChildTouchChargesItsCgroup(t *testing.T) {
	cg := NewMemoryCgroup(t, "evictd-cgrouptest-touch")
	const mib = 1 << 20
	c := StartChild(t, cg)
	before, err := cg.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Touch(16)
	if err != nil {
		t.Fatal(err)
	}
	after, err := cg.MemoryUsage()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 16*mib || got.End < got.Start || got.Crossed != 0 {
		t.Errorf("usage %d -> %d after touching 16 MiB (%+v); want 16 MiB more, no crossing", before, after, got)
	}
	threshold := after + 8*mib
	if err := c.BeginTouch(16, &Watch{File: cg.UsagePath(), Threshold: threshold}); err != nil {
		t.Fatal(err)
	}
	got, err = c.EndTouch(TouchTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if got.Crossed < got.Start || got.Crossed > got.End || got.Last < threshold {
		t.Errorf("watched touch %+v; want the crossing of %d between start and end", got, threshold)
	}
	if d := Now().Sub(got.End); d < 0 || d > TouchTimeout {
		t.Errorf("the child's end of touch is %v before now; its clock is not ours", d)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop after the commands: %v", err)
	}
	if final, err := cg.MemoryUsage(); err != nil || final >= after {
		t.Errorf("usage %d, %v after the child exited; want below %d", final, err, after)
	}
}

func TestSetMemoryLimitAndWrite(t *testing.T) {
	cg := NewMemoryCgroup(t, "evictd-cgrouptest-limit")
	cg.SetMemoryLimit(t, 64<<20)
	if got, err := ReadInt(cg.Path(LimitFile)); err != nil || got != 64<<20 {
		t.Errorf("%s = %d, %v; want %d", LimitFile, got, err, 64<<20)
	}
	if err := cg.Write(LimitFile, "bogus"); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("writing bogus = %v; want an error naming the value", err)
	}
	if _, err := ReadInt(cg.Path("memory.stat")); err == nil || !strings.Contains(err.Error(), "memory.stat") {
		t.Errorf("ReadInt(memory.stat) = %v; want an error naming the file", err)
	}
}

// TestChildStallsInASmallCgroup reads a cold file eight times the cgroup's
// limit: the cgroup hits its limit over and over. (A CI machine's disk reads
// random pages at some 20 MiB/s, and the child's own memory takes 2 MiB.)
func TestChildStallsInASmallCgroup(t *testing.T) {
	cg := NewMemoryCgroup(t, "evictd-cgrouptest-stall")
	cg.SetMemoryLimit(t, 4<<20)
	file := ColdFile(t, 32<<20)
	c := StartChild(t, cg)
	if err := c.BeginStall(file, time.Second); err != nil {
		t.Fatal(err)
	}
	// The child answers the touch only after the stall.
	if _, err := c.Touch(1); err != nil {
		t.Fatal(err)
	}
	if n, err := cg.LimitHits(); err != nil || n == 0 {
		t.Errorf("limit hits = %d, %v after the stall; want the limit hit", n, err)
	}
	if err := c.BeginStall(filepath.Join(t.TempDir(), "gone"), time.Second); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("stalling on a missing file = %v; want an error naming it", err)
	}
}

// TestRemoveKillsAndRemovesDeepestFirst leaves a child running in a
// grandchild cgroup the helper did not make.
func TestRemoveKillsAndRemovesDeepestFirst(t *testing.T) {
	top := NewMemoryCgroup(t, "evictd-cgrouptest-rm")
	mid := top.Sub(t, "mid")
	deep := filepath.Join(mid.Dir(), "deep")
	if err := os.Mkdir(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	c := StartChild(t, &Cgroup{dir: deep})
	if _, err := c.Touch(1); err != nil {
		t.Fatal(err)
	}
	if err := top.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, d := range []string{deep, mid.Dir(), top.Dir()} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s: %v after Remove; want it gone", d, err)
		}
	}
	if err := c.Stop(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop = %v; want the child killed by Remove", err)
	}
	if err := top.Remove(); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
}

// TestRemoveMovesThisProcessOut puts the test process itself into a cgroup:
// Remove must move it to the parent, not kill it.
func TestRemoveMovesThisProcessOut(t *testing.T) {
	cg := NewMemoryCgroup(t, "evictd-cgrouptest-self")
	home := ownMemoryCgroup(t)
	t.Cleanup(func() {
		if err := (&Cgroup{dir: filepath.Join(MemoryRoot, home)}).Add(os.Getpid()); err != nil {
			t.Errorf("moving back to %s: %v", home, err)
		}
	})
	if err := cg.Add(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if got := ownMemoryCgroup(t); got != "/"+cg.Name() {
		t.Fatalf("in memory cgroup %s, want /%s", got, cg.Name())
	}
	if err := cg.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if got := ownMemoryCgroup(t); got != "/" {
		t.Errorf("in memory cgroup %s after Remove, want the parent /", got)
	}
}

// ownMemoryCgroup reads this process's memory cgroup from
// /proc/self/cgroup: the v1 memory line ("4:memory:/a/b"), or on a v2-only
// host the unified one ("0::/a/b").
func ownMemoryCgroup(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && (f[1] == "memory" || V2() && f[0] == "0" && f[1] == "") {
			return f[2]
		}
	}
	t.Fatalf("no memory line in /proc/self/cgroup: %q", b)
	return ""
}

func TestHierarchyOf(t *testing.T) {
	pids := struct{ dir, root, rel string }{filepath.Join(PidsRoot, "a"), PidsRoot, "/a"}
	if V2() {
		// One hierarchy holds every controller: no v1 pids mount, a
		// "pids" there is a group like any other.
		pids.root, pids.rel = MemoryRoot, "/pids/a"
	}
	for _, tc := range []struct{ dir, root, rel string }{
		{filepath.Join(MemoryRoot, "a/b"), MemoryRoot, "/a/b"},
		pids,
		{filepath.Join(UnifiedRoot, "a"), UnifiedRoot, "/a"},
		{MemoryRoot, "", ""},
		{"/not-a-hierarchy/a", "", ""},
		{MemoryRoot + "-not/a", "", ""},
	} {
		root, rel, err := hierarchyOf(tc.dir)
		if root != tc.root || rel != tc.rel || (err != nil) != (tc.root == "") {
			t.Errorf("hierarchyOf(%s) = %q, %q, %v; want %q, %q", tc.dir, root, rel, err, tc.root, tc.rel)
		}
		if err != nil && !strings.Contains(err.Error(), tc.dir) {
			t.Errorf("error %q does not name %s", err, tc.dir)
		}
	}
}

// The library creates v1 cgroups with cgroup1.New and the unified one's
// with cgroup2.NewManager; both accept an existing directory, which create
// must refuse, and both must be gone after Remove.
func TestCreateThroughTheLibrary(t *testing.T) {
	for _, tc := range []struct {
		require func(testing.TB)
		root    string
	}{{Require, MemoryRoot}, {RequireUnified, UnifiedRoot}} {
		tc.require(t)
		dir := filepath.Join(tc.root, UniqueName("evictd-cgrouptest-lib"))
		c, err := create(dir)
		if err != nil {
			t.Fatalf("create(%s): %v", dir, err)
		}
		t.Cleanup(func() { _ = c.Remove() })
		if c.deleteSelf == nil {
			t.Errorf("%s: no library handle to delete it", dir)
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			t.Errorf("%s is not a cgroup: %v", dir, err)
		}
		// A memory cgroup's children are memory cgroups too: on v2 only
		// once the parent enables memory for them.
		if tc.root == MemoryRoot {
			sub, err := create(filepath.Join(dir, "sub"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sub.MemoryUsage(); err != nil {
				t.Errorf("a group made under %s has no memory usage (%s controller): %v", dir, Version(), err)
			}
		}
		if _, err := create(dir); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("creating %s again: %v; want an error saying it exists", dir, err)
		}
		if err := c.Remove(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s after Remove: %v; want it gone", dir, err)
		}
	}
}
