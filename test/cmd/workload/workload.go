// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// growTick is how often growth is applied; 10 steps a second keeps the rate
// smooth enough for pressure detection tests without busy work.
const growTick = 100 * time.Millisecond

type workload struct {
	cfg      config
	out      io.Writer
	pageSize int
	mem      []byte
	touched  int64
	// reread counts the bytes --reread-mib has read back so far.
	reread atomic.Int64
	// churned counts the --churn-mib cycles done (mapped, touched,
	// unmapped), churnTouched the MiB they touched.
	churned      atomic.Int64
	churnTouched atomic.Int64
	// terms is where SIGTERM arrives; touchTo looks at it without taking
	// the signal, so that the main loop still sees it (with --ignore-term
	// it takes it, see termIgnored).
	terms <-chan os.Signal
	// ignoring: a SIGTERM was ignored (--ignore-term); from then on touchTo
	// reports what it holds and what it asks for every growReport.
	ignoring   bool
	lastReport time.Time
	// growStart is when the growth (--grow-mib-per-sec) began; zero before.
	growStart time.Time
}

// growReport is how often a workload that ignored SIGTERM says, while it
// touches pages, what it holds and what it asks for: a throttled grower
// (memory.high) shows there that it still asks for more.
const growReport = time.Second

func newWorkload(cfg config, out io.Writer) *workload {
	return &workload{cfg: cfg, out: out, pageSize: os.Getpagesize()}
}

func (w *workload) run(ctx context.Context, terms <-chan os.Signal) error {
	w.terms = terms
	if peak := w.cfg.peakMiB(); peak > 0 {
		// One reservation for the whole peak: pages cost nothing until they
		// are written, and the address range never moves.
		mem, err := unix.Mmap(-1, 0, int(peak*mib), unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			return fmt.Errorf("reserve %d MiB: %w", peak, err)
		}
		w.mem = mem
		defer unix.Munmap(mem) //nolint:errcheck // the process is exiting
	}

	children, err := spawnChildren(w.cfg.procs)
	defer stopChildren(children)
	if err != nil {
		return err
	}
	if w.cfg.procs > 0 {
		fmt.Fprintf(w.out, "workload: spawned %d processes\n", w.cfg.procs)
	}

	w.touchTo(w.cfg.holdMiB * mib)
	fmt.Fprintf(w.out, "workload: holding %d MiB\n", w.cfg.holdMiB)
	if w.cfg.files > 0 {
		if err := makeFiles(w.cfg.writeDir, w.cfg.files); err != nil {
			return err
		}
		fmt.Fprintf(w.out, "workload: made %d files in %s\n", w.cfg.files, w.cfg.writeDir)
	}
	if w.cfg.logMiB > 0 {
		if err := writeLog(w.out, w.cfg.logMiB); err != nil {
			return err
		}
		fmt.Fprintf(w.out, "workload: logged %d MiB\n", w.cfg.logMiB)
	}

	writeDone := make(chan error, 1)
	if w.cfg.writeMiB > 0 {
		go func() { writeDone <- writeFiles(ctx, w.cfg.writeDir, w.cfg.writeMiB, w.cfg.writeMiBPerSec) }()
	}
	// The reread loop runs until run returns; its lines come through
	// rereadLines, so that only this goroutine writes to out.
	rereadLines := make(chan string, 16)
	rereadDone := make(chan error, 1)
	if w.cfg.rereadMiB > 0 {
		rctx, cancel := context.WithCancel(ctx)
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			rereadDone <- w.rereadLoop(rctx, rereadLines)
		}()
		defer func() { cancel(); <-finished }()
	}

	// The churn runs in a goroutine of its own until SIGTERM or the end of
	// run; stopChurn ends it, waits and prints its last lines, at once on
	// SIGTERM, so that a chunk half touched is not finished during the term
	// delay.
	churnLines := make(chan string, 16)
	stopChurn := func() {}
	if w.cfg.churnMiB > 0 {
		cctx, cancel := context.WithCancel(ctx)
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			w.churnLoop(cctx, churnLines)
		}()
		stopChurn = func() {
			cancel()
			<-finished
			for len(churnLines) > 0 {
				fmt.Fprintln(w.out, <-churnLines)
			}
		}
		defer func() { stopChurn() }()
	}

	var grow <-chan time.Time
	if w.cfg.growMiBPerSec > 0 {
		t := time.NewTicker(growTick)
		defer t.Stop()
		grow = t.C
	}
	var burst <-chan time.Time
	var burstTimer *time.Timer
	burstsDone := 0
	if w.cfg.bursts > 0 {
		burstTimer = time.NewTimer(w.cfg.burstDelay)
		defer burstTimer.Stop()
		burst = burstTimer.C
	}
	var exit <-chan time.Time
	if w.cfg.exitAfter > 0 {
		t := time.NewTimer(w.cfg.exitAfter)
		defer t.Stop()
		exit = t.C
	}

	w.growStart = time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-exit:
			fmt.Fprintln(w.out, "workload: exit-after reached")
			return nil
		case <-terms:
			if w.cfg.ignoreTerm {
				w.termIgnored()
				continue
			}
			stopChurn()
			stopChurn = func() {}
			fmt.Fprintf(w.out, "workload: SIGTERM, exiting in %s\n", w.cfg.termDelay)
			select {
			case <-ctx.Done():
			case <-time.After(w.cfg.termDelay):
			}
			return nil
		case line := <-rereadLines:
			fmt.Fprintln(w.out, line)
		case line := <-churnLines:
			fmt.Fprintln(w.out, line)
		case err := <-rereadDone:
			// Like a full disk for --write-mib: said, and the rest goes on.
			fmt.Fprintf(w.out, "workload: reread stopped: %v\n", err)
		case err := <-writeDone:
			// A full disk is the point of some tests: report it and keep
			// holding what was written instead of exiting.
			if err != nil {
				fmt.Fprintf(w.out, "workload: write stopped: %v\n", err)
			} else {
				fmt.Fprintf(w.out, "workload: wrote %d MiB to %s\n", w.cfg.writeMiB, w.cfg.writeDir)
			}
		case <-burst:
			start := time.Now()
			w.touchTo(w.touched + w.cfg.burstMiB*mib)
			burstsDone++
			fmt.Fprintf(w.out, "workload: burst %d of %d: %d MiB in %s, holding %d MiB\n", burstsDone, w.cfg.bursts,
				w.cfg.burstMiB, time.Since(start).Round(time.Millisecond), w.touched/mib)
			if burstsDone == w.cfg.bursts {
				fmt.Fprintf(w.out, "workload: bursts done, holding %d MiB\n", w.touched/mib)
				burst = nil
				continue
			}
			// Bursts start interval apart, however long one took.
			burstTimer.Reset(max(time.Until(start.Add(w.cfg.burstInterval)), 0))
		case now := <-grow:
			target := w.growTarget(now)
			w.touchTo(target)
			if target == w.cfg.growToMiB*mib {
				fmt.Fprintf(w.out, "workload: grew to %d MiB\n", w.cfg.growToMiB)
				grow = nil
			}
		}
	}
}

// touchTo writes one byte into every page up to n bytes. A non-zero write
// forces the kernel to back the page with its own frame, charged to this
// process's memory cgroup.
//
// It stops early once SIGTERM is pending. Growth follows the wall clock, so
// a process slowed by reclaim owes hundreds of MiB at its next tick; without
// the check an evicted leaker went on paying that debt for its whole grace
// period and past it, as no real program does (Go's default SIGTERM
// disposition ends it at once), until the kernel's OOM killer ended it.
// With --ignore-term it takes the signal and goes on: that leaker is the
// point (a PID 1 without a handler), and it then reports every growReport
// what it holds and what it asks for: n, or what its growth asks for by
// now when that is more (a touchTo slowed down by the kernel falls behind
// the wall clock).
func (w *workload) touchTo(n int64) {
	const checkEvery = 256 // pages: 1 MiB of 4 KiB pages
	const reportEvery = 16 // pages: a throttled fault can take seconds
	for i := 0; w.touched < n; i++ {
		if i%checkEvery == 0 && len(w.terms) > 0 {
			if !w.cfg.ignoreTerm {
				return
			}
			<-w.terms // only this goroutine receives from terms
			w.termIgnored()
		}
		if w.ignoring && i%reportEvery == 0 && time.Since(w.lastReport) >= growReport {
			w.lastReport = time.Now()
			ask := n
			if w.cfg.growMiBPerSec > 0 && !w.growStart.IsZero() {
				ask = max(ask, w.growTarget(w.lastReport))
			}
			fmt.Fprintf(w.out, "workload: growing: holding %d MiB, asking for %d MiB\n", w.touched/mib, ask/mib)
		}
		w.mem[w.touched] = 1
		w.touched += int64(w.pageSize)
	}
}

// growTarget is what the growth asks to hold at now: the hold plus the rate
// since the growth began, up to --grow-to-mib. Growth follows the wall
// clock, so a grower slowed down (reclaim, memory.high) asks for ever more.
func (w *workload) growTarget(now time.Time) int64 {
	target := w.cfg.holdMiB*mib + int64(now.Sub(w.growStart).Seconds()*w.cfg.growMiBPerSec*mib)
	return min(target, w.cfg.growToMiB*mib)
}

// termIgnored says that a SIGTERM was ignored (--ignore-term) and turns on
// touchTo's reports.
func (w *workload) termIgnored() {
	fmt.Fprintf(w.out, "workload: SIGTERM ignored (--ignore-term), holding %d MiB\n", w.touched/mib)
	w.ignoring = true
}

// churnReport is how often the churn says how many cycles it has done.
const churnReport = 10 * time.Second

// churnLoop maps --churn-mib of anonymous memory, writes every page (each is
// charged to the memory cgroup as it is written), unmaps it (uncharged at
// once) and starts again after --churn-pause, until ctx ends: the heap of a
// garbage-collected runtime that allocates above what it keeps and gives
// it back. ctx is looked at every MiB, so a SIGTERM in the middle of a
// chunk stops the touching there. Its lines go to lines; the last, when ctx
// ends, counts the cycles.
func (w *workload) churnLoop(ctx context.Context, lines chan<- string) {
	say := func(format string, args ...any) {
		select {
		case lines <- fmt.Sprintf(format, args...):
		default: // the main loop is gone or behind; a report is not worth waiting for
		}
	}
	size := int(w.cfg.churnMiB * mib)
	say("workload: churning %d MiB above the hold, %s apart", w.cfg.churnMiB, w.cfg.churnPause)
	began := time.Now()
	lastAt, lastCycles := began, int64(0)
	defer func() {
		say("workload: churn: %d cycles of %d MiB in %s", w.churned.Load(), w.cfg.churnMiB, time.Since(began).Round(time.Millisecond))
	}()
	for ctx.Err() == nil {
		mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			say("workload: churn stopped: map %d MiB: %v", w.cfg.churnMiB, err)
			return
		}
		whole := w.touchAll(ctx, mem)
		_ = unix.Munmap(mem)
		if !whole {
			return
		}
		c := w.churned.Add(1)
		if now := time.Now(); now.Sub(lastAt) >= churnReport {
			say("workload: churn: %d cycles, %.1f a second lately", c, float64(c-lastCycles)/now.Sub(lastAt).Seconds())
			lastAt, lastCycles = now, c
		}
		if w.cfg.churnPause > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(w.cfg.churnPause):
			}
		}
	}
}

// touchAll writes one byte into every page of mem, looking at ctx every
// MiB; false when ctx ended first.
func (w *workload) touchAll(ctx context.Context, mem []byte) bool {
	for off := 0; off < len(mem); off += w.pageSize {
		if off%mib == 0 {
			if ctx.Err() != nil {
				return false
			}
			if off > 0 {
				w.churnTouched.Add(1)
			}
		}
		mem[off] = 1
	}
	return true
}

// writeFiles writes total MiB into one file in dir, at rate MiB/s when rate
// is positive.
func writeFiles(ctx context.Context, dir string, total int64, rate float64) error {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("workload-%d.dat", os.Getpid())),
		os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, mib)
	for i := range chunk {
		chunk[i] = byte(i%251 + 1)
	}
	start := time.Now()
	for i := int64(0); i < total; i++ {
		if _, err := f.Write(chunk); err != nil {
			return fmt.Errorf("after %d MiB: %w", i, err)
		}
		if rate <= 0 {
			continue
		}
		due := start.Add(time.Duration(float64(i+1) / rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(due)):
		}
	}
	return f.Sync()
}

// rereadChunk is the size of each read of the reread loop; rereadReport how
// often it reports its progress.
const (
	rereadChunk  = mib
	rereadReport = 10 * time.Second
)

// rereadLoop writes --reread-mib into a file in --reread-dir, leaving none
// of it in the page cache, then reads the file in chunks, over and over,
// with no advice to the kernel (--reread-readers at once, each over its own
// share of it): every page read is charged to the process's memory cgroup. Under a memory limit well below the file's
// size the cgroup keeps reclaiming its own page cache and reading it back,
// a memory stall (PSI) that frees nothing: node memory stays available.
// Its lines go to lines; it returns only on an error or when ctx ends.
func (w *workload) rereadLoop(ctx context.Context, lines chan<- string) error {
	say := func(format string, args ...any) bool {
		select {
		case lines <- fmt.Sprintf(format, args...):
			return true
		case <-ctx.Done():
			return false
		}
	}
	dir := w.cfg.rereadDir
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		say("workload: reread: warning: %s is a tmpfs, whose page cache is not reclaimable without swap", dir)
	}
	name := filepath.Join(dir, fmt.Sprintf("reread-%d.dat", os.Getpid()))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	size := w.cfg.rereadMiB * mib
	if !say("workload: reread: writing %d MiB to %s", w.cfg.rereadMiB, name) {
		return nil
	}
	start := time.Now()
	if err := writeUncached(ctx, f, size); err != nil {
		return err
	}
	if !say("workload: reread: wrote %d MiB in %s; rereading it from now on", w.cfg.rereadMiB, time.Since(start).Round(time.Millisecond)) {
		return nil
	}
	// Each reader loops over its own share of the file, the first one
	// reports; the first error stops them all.
	readers := max(w.cfg.rereadReaders, 1)
	share := (size/int64(readers) + mib - 1) / mib * mib
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, readers)
	for r := range readers {
		from, to := min(int64(r)*share, size), min(int64(r+1)*share, size)
		go func() { errs <- w.rereadRange(rctx, f, from, to, r == 0, say) }()
	}
	var first error
	for range readers {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// rereadRange reads [from, to) of f over and over, in chunks, until ctx
// ends; with report it says how all the readers go (their bytes, its own
// passes).
func (w *workload) rereadRange(ctx context.Context, f *os.File, from, to int64, report bool, say func(string, ...any) bool) error {
	if from >= to {
		return nil
	}
	buf := make([]byte, rereadChunk)
	began := time.Now()
	lastAt, lastBytes := began, w.reread.Load()
	for pass := 1; ; pass++ {
		for off := from; off < to; {
			if ctx.Err() != nil {
				return nil
			}
			n, err := f.ReadAt(buf[:min(int64(len(buf)), to-off)], off)
			if n == 0 && err != nil {
				return fmt.Errorf("pass %d at %d MiB: %w", pass, off/mib, err)
			}
			off += int64(n)
			total := w.reread.Add(int64(n))
			if now := time.Now(); report && now.Sub(lastAt) >= rereadReport {
				rate := float64(total-lastBytes) / mib / now.Sub(lastAt).Seconds()
				if !say("workload: reread: pass %d, %d MiB read in %s, %.1f MiB/s lately", pass, total/mib, now.Sub(began).Round(time.Second), rate) {
					return nil
				}
				lastAt, lastBytes = now, total
			}
		}
	}
}

// writeUncached fills f with size bytes (none zero), flushing and dropping
// what it wrote from the page cache every 8 MiB, so that writing neither
// fills the cgroup's memory nor stalls on it.
func writeUncached(ctx context.Context, f *os.File, size int64) error {
	chunk := make([]byte, mib)
	for i := range chunk {
		chunk[i] = byte(i%251 + 1)
	}
	const flushEvery = 8 * mib
	for off := int64(0); off < size; {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n, err := f.WriteAt(chunk[:min(int64(len(chunk)), size-off)], off)
		if err != nil {
			return fmt.Errorf("after %d MiB: %w", off/mib, err)
		}
		off += int64(n)
		if off%flushEvery == 0 || off == size {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				return err
			}
			_ = unix.Fadvise(int(f.Fd()), 0, off, unix.FADV_DONTNEED)
		}
	}
	return nil
}

// spawnChildren starts n copies of this binary in --child mode. They stay in
// this process group, and die with their parent even when it is SIGKILLed.
func spawnChildren(n int) ([]*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command(self, "--child")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return cmds, fmt.Errorf("spawn process %d of %d: %w", len(cmds)+1, n, err)
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

func stopChildren(cmds []*exec.Cmd) {
	for _, c := range cmds {
		if err := c.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			_ = c.Process.Kill()
		}
	}
	for _, c := range cmds {
		_ = c.Wait()
	}
}

// logLine is the length of writeLog's lines, newline included: long lines
// (half of containerd's 16 KiB, so none is split) because the runtime's
// log pipe pays per line, and 100 MiB in 1 KiB lines took more than 4
// minutes on a busy emulated node.
const logLine = 8 << 10

// writeLog prints n MiB of text, in lines of logLine bytes.
func writeLog(out io.Writer, n int64) error {
	line := []byte(strings.Repeat("evictd workload log line ", logLine/25+1)[:logLine-1] + "\n")
	for range n << 20 / logLine {
		if _, err := out.Write(line); err != nil {
			return fmt.Errorf("log: %w", err)
		}
	}
	return nil
}

// makeFiles creates n empty files under dir, a thousand to a directory.
func makeFiles(dir string, n int) error {
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("files-%d", i/1000))
		if i%1000 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
		}
		f, err := os.Create(filepath.Join(sub, strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("after %d files: %w", i, err)
		}
		f.Close()
	}
	return nil
}
