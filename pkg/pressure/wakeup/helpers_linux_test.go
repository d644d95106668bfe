//go:build linux

package wakeup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary re-executes itself as a child workload in a cgroup; the
// environment variable selects the child's job.
const childEnv = "EVICTD_WAKEUP_TEST_CHILD"

// Mount points of the hybrid hierarchy on the test machines; overridable for
// hosts that mount them elsewhere.
func memcgRoot() string   { return envOr("EVICTD_TEST_MEMCG_ROOT", "/sys/fs/cgroup/memory") }
func unifiedRoot() string { return envOr("EVICTD_TEST_CGROUP2_ROOT", "/sys/fs/cgroup/unified") }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "alloc":
		os.Exit(childAlloc())
	case "stall":
		os.Exit(childStall())
	case "idle":
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown child job %q\n", os.Getenv(childEnv))
		os.Exit(2)
	}
}

// need skips the test, or fails it under CI=true, when the machine cannot
// give it what it needs.
func need(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("this test needs %s (CI=true, so this is a failure)", what)
	}
	t.Skipf("skipped: needs %s", what)
}

func requireMemcgV1(t testing.TB) {
	t.Helper()
	need(t, os.Geteuid() == 0, "root")
	_, err := os.Stat(filepath.Join(memcgRoot(), "cgroup.event_control"))
	need(t, err == nil, "a writable cgroup v1 memory controller at "+memcgRoot())
}

func requireCgroup2(t testing.TB) {
	t.Helper()
	need(t, os.Geteuid() == 0, "root")
	_, err := os.Stat(filepath.Join(unifiedRoot(), "cgroup.procs"))
	need(t, err == nil, "a cgroup2 hierarchy at "+unifiedRoot())
}

// makeCgroup creates a uniquely named cgroup under parent and removes it when
// the test ends, killing whatever still runs in it.
func makeCgroup(t testing.TB, parent, prefix string) string {
	t.Helper()
	dir := filepath.Join(parent, fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), rand.Int63()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := removeCgroup(dir); err != nil {
			t.Errorf("clean up cgroup: %v", err)
		}
	})
	return dir
}

func removeCgroup(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		for _, f := range strings.Fields(string(procs)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		err = os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove %s: %w (processes: %q)", dir, err, strings.TrimSpace(string(procs)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func enterCgroup(dir string, pid int) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// child is a re-executed test binary running one child job.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startChild(t testing.TB, job string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+job)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(c.stop)
	return c
}

func (c *child) stop() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

func (c *child) send(format string, args ...any) error {
	_, err := fmt.Fprintf(c.stdin, format+"\n", args...)
	return err
}

// line returns the child's next output line.
func (c *child) line(timeout time.Duration) (string, error) {
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", errors.New("child exited without answering")
		}
		return l, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("no answer from the child within %s", timeout)
	}
}

// monotonicNow reads CLOCK_MONOTONIC, which is shared by all processes, so a
// child's timestamps compare with the parent's.
func monotonicNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// childAlloc waits for "go <threshold> <usage file> <bytes>", then maps and
// touches bytes of anonymous memory page by page, reading the usage file
// every 256 KiB. It prints "cross <monotonic ns>" right after the first read
// at or above threshold (or "nocross <last usage>"), then "done", and waits
// for stdin to close.
func childAlloc() int {
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return 1
	}
	var threshold, size int64
	var usagePath string
	if _, err := fmt.Sscanf(in.Text(), "go %d %s %d", &threshold, &usagePath, &size); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad command:", err)
		return 2
	}
	usage, err := os.Open(usagePath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: mmap:", err)
		return 1
	}
	// 4 KiB faults, so usage grows smoothly rather than in 2 MiB steps.
	_ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	var buf [32]byte
	crossed := false
	var last int64
	const page, every = 4096, 64
	for off := 0; off < len(mem); off += page {
		mem[off] = 1
		if crossed || (off/page)%every != every-1 {
			continue
		}
		n, err := usage.ReadAt(buf[:], 0)
		if err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintln(os.Stderr, "child: read usage:", err)
			return 1
		}
		last, _ = strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
		if last >= threshold {
			at := monotonicNow()
			crossed = true
			fmt.Printf("cross %d\n", at)
		}
	}
	if !crossed {
		fmt.Printf("nocross %d\n", last)
	}
	fmt.Println("done")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// childStall waits for "go <file> <seconds>", then reads random pages of the
// file through a mapping for that long. Run in a memory cgroup whose limit is
// far below the file's size, every fault has to reclaim the cgroup's own page
// cache first: real memory stall, without swap.
func childStall() int {
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return 1
	}
	var path string
	var secs int
	if _, err := fmt.Sscanf(in.Text(), "go %s %d", &path, &secs); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad command:", err)
		return 2
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	st, err := f.Stat()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: mmap:", err)
		return 1
	}
	_ = unix.Madvise(mem, unix.MADV_RANDOM)
	fmt.Println("stalling")
	rng := rand.New(rand.NewSource(1))
	pages := len(mem) / 4096
	var sum byte
	for end := time.Now().Add(time.Duration(secs) * time.Second); time.Now().Before(end); {
		for i := 0; i < 256; i++ {
			sum += mem[rng.Intn(pages)*4096]
		}
	}
	fmt.Println("done", sum)
	return 0
}

// percentile returns the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s)) + 0.999999)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}
