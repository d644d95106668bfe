// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// childEnv marks the re-executed test binary as a child workload.
const childEnv = "EVICTD_CGROUPTEST_CHILD"

// RunChildIfRequested turns this process into a child workload and exits
// when StartChild started it; otherwise it returns at once. Call it first in
// TestMain.
func RunChildIfRequested() {
	if os.Getenv(childEnv) == "" {
		return
	}
	os.Exit(serve(os.Stdin, os.Stdout))
}

const pageSize = 4096

// server is the child's state: the memory it touched stays mapped, so
// resident and charged to its cgroup, until the child exits.
type server struct {
	out  io.Writer
	kept [][]byte
	sink byte // what the stall reads, kept so that the reads are not optimized away
}

// serve answers commands from in until in closes, and returns the exit code.
func serve(in io.Reader, out io.Writer) int {
	s := &server{out: out}
	defer s.release()
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		c, err := parseCommand(sc.Text())
		if err != nil {
			s.answer("error " + err.Error())
			continue
		}
		switch c.op {
		case "touch":
			t, err := s.touch(c)
			if err != nil {
				s.answer("error " + err.Error())
				continue
			}
			s.answer(t.String())
		case "stall":
			if err := s.stall(c); err != nil {
				s.answer("error " + err.Error())
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "cgrouptest child: reading commands:", err)
		return 1
	}
	return 0
}

// release unmaps what touch kept, for a serve that runs inside a test.
func (s *server) release() {
	for _, m := range s.kept {
		_ = unix.Munmap(m)
	}
	s.kept = nil
}

func (s *server) answer(line string) {
	// One line per answer: the parent reads lines.
	fmt.Fprintln(s.out, strings.ReplaceAll(line, "\n", " "))
}

// touch maps c.mib MiB of anonymous memory outside the Go heap, so the
// garbage collector cannot free it, and writes one byte a page so that every
// page is resident and charged. Huge pages are declined so that the charge
// grows in 4 KiB steps a watcher can follow. With a watched file, it reads
// the file every 64 pages until the value reaches the threshold.
func (s *server) touch(c command) (Touched, error) {
	var watch *os.File
	if c.file != "" {
		f, err := os.Open(c.file)
		if err != nil {
			return Touched{}, err
		}
		defer f.Close()
		watch = f
	}
	mem, err := unix.Mmap(-1, 0, c.mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return Touched{}, fmt.Errorf("mmap %d MiB: %w", c.mib, err)
	}
	s.kept = append(s.kept, mem)
	_ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE) // advice only: without it the steps are coarser
	var t Touched
	var buf [32]byte
	const every = 64
	t.Start = Now()
	for off := 0; off < len(mem); off += pageSize {
		mem[off] = 1
		if watch == nil || t.Crossed != 0 || (off/pageSize)%every != every-1 {
			continue
		}
		n, err := watch.ReadAt(buf[:], 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return Touched{}, fmt.Errorf("reading %s: %w", c.file, err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
		if err != nil {
			return Touched{}, fmt.Errorf("%s holds %q, not a number", c.file, buf[:n])
		}
		t.Last = v
		if v >= c.threshold {
			t.Crossed = Now()
		}
	}
	t.End = Now()
	return t, nil
}

// stall maps c.file and reads random pages of it for c.stall. In a memory
// cgroup whose limit is far below the file's size, every fault must first
// reclaim the cgroup's own page cache: real memory stall, without swap.
func (s *server) stall(c command) error {
	f, err := os.Open(c.file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < pageSize {
		return fmt.Errorf("%s has %d bytes, less than a page to stall on", c.file, st.Size())
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", c.file, err)
	}
	defer func() { _ = unix.Munmap(mem) }()
	_ = unix.Madvise(mem, unix.MADV_RANDOM) // no read-ahead: one fault, one page
	s.answer("stalling")
	rng := rand.New(rand.NewPCG(1, 2))
	pages := len(mem) / pageSize
	for end := time.Now().Add(c.stall); time.Now().Before(end); {
		for range 256 {
			s.sink += mem[rng.IntN(pages)*pageSize]
		}
	}
	return nil
}
