// SPDX-License-Identifier: Apache-2.0

// Command filler is the container process the fast-path benchmarks (package
// bench) use to fill memory faster than page faults from user space can:
// every allocation is one mmap call with MAP_POPULATE, so the kernel
// allocates and charges the pages inside the call. (Touching pages one by one
// reaches only about 300 MiB/s on the 2-CPU VM the benchmarks were written
// on, so a nominal 1000 MiB/s fill would not be one.)
//
//	filler --step-mib N
//	    on each SIGUSR1, allocate N MiB in one call: a step
//	filler --grow-mib-per-sec R --grow-to-mib C
//	    from the start, allocate every 10 ms what keeps the total on R·t,
//	    up to C MiB
//	filler --grow-fastest --grow-to-mib C
//	    from the start, allocate 8 MiB a call, one call after the other:
//	    as fast as this kernel charges pages, up to C MiB
//	filler --cache-file F --cache-mib N ...
//	    before anything else, write N MiB to the file F and sync it: page
//	    cache charged to the process's cgroup, written once and so on the
//	    inactive list, which a step inside a memory limit must reclaim
//	    (the stall that PSI and memory.events report)
//
// It prints "filler: ready", then one line per step or at the end of the
// growth, and holds the memory until SIGTERM or SIGINT, on which it exits 0
// at once. With --ignore-term it goes on (growing, then holding) through
// SIGTERM, as a container's PID 1 without a handler does, until SIGKILL. A growth reports the rate it achieved, from its own calls, when
// it ends and on the signal: "filler: achieved R MiB/s (N MiB in D)".
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// tick is how often growth is applied: at 1000 MiB/s, 10 MiB a call.
const tick = 10 * time.Millisecond

// fastChunk is what --grow-fastest maps a call: small enough that a signal
// waits at most a few milliseconds, large enough that the calls' own cost
// does not set the rate.
const fastChunk = 8 * mib

type config struct {
	stepMiB  int64
	growRate float64
	fastest  bool
	// ignoreTerm keeps going through SIGTERM and SIGINT.
	ignoreTerm bool
	growTo     int64
	cacheFile  string
	cacheMiB   int64
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	cfg, err := parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "filler: %v\n", err)
		return 2
	}
	if cfg.cacheMiB > 0 {
		if err := writeCache(cfg.cacheFile, cfg.cacheMiB); err != nil {
			fmt.Fprintf(stderr, "filler: %v\n", err)
			return 1
		}
	}
	fmt.Fprintln(stdout, "filler: ready")
	var held [][]byte
	alloc := func(n int64) error {
		m, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			return fmt.Errorf("map %d bytes: %w", n, err)
		}
		held = append(held, m)
		return nil
	}

	var grow <-chan time.Time
	var total int64
	start := time.Now()
	var lastAlloc time.Time
	achieved := func() {
		if total > 0 {
			d := lastAlloc.Sub(start)
			fmt.Fprintf(stdout, "filler: achieved %.0f MiB/s (%d MiB in %s)\n", float64(total)/mib/d.Seconds(), total/mib, d.Round(time.Millisecond))
		}
	}
	if cfg.growRate > 0 {
		t := time.NewTicker(tick)
		defer t.Stop()
		grow = t.C
	}
	// ends reports whether sig ends the filler, saying so when it does not.
	ends := func(sig os.Signal) bool {
		if sig == syscall.SIGUSR1 {
			return false
		}
		if cfg.ignoreTerm {
			fmt.Fprintf(stdout, "filler: %v ignored\n", sig)
			return false
		}
		return true
	}
	if cfg.fastest {
		for total < cfg.growTo*mib {
			select {
			case sig := <-sigs:
				if ends(sig) {
					achieved()
					return 0
				}
			default:
			}
			if err := alloc(min(fastChunk, cfg.growTo*mib-total)); err != nil {
				fmt.Fprintf(stderr, "filler: %v\n", err)
				return 1
			}
			total += min(fastChunk, cfg.growTo*mib-total)
			lastAlloc = time.Now()
		}
		fmt.Fprintf(stdout, "filler: grew to %d MiB in %s\n", cfg.growTo, time.Since(start))
		achieved()
	}
	for {
		select {
		case sig := <-sigs:
			if ends(sig) {
				if cfg.growRate > 0 && grow != nil {
					achieved()
				}
				return 0
			}
			if sig != syscall.SIGUSR1 {
				continue
			}
			if cfg.stepMiB == 0 {
				continue
			}
			begin := time.Now()
			if err := alloc(cfg.stepMiB * mib); err != nil {
				fmt.Fprintf(stderr, "filler: %v\n", err)
				return 1
			}
			end := time.Now()
			fmt.Fprintf(stdout, "filler: stepped %d MiB in %s (start %d end %d)\n",
				cfg.stepMiB, end.Sub(begin), begin.UnixNano(), end.UnixNano())
		case now := <-grow:
			target := min(int64(now.Sub(start).Seconds()*cfg.growRate*mib), cfg.growTo*mib)
			// Whole pages only; the remainder comes with the next tick.
			if n := (target - total) &^ (4096 - 1); n > 0 {
				if err := alloc(n); err != nil {
					fmt.Fprintf(stderr, "filler: %v\n", err)
					return 1
				}
				total += n
				lastAlloc = time.Now()
			}
			if total >= cfg.growTo*mib-4096 {
				fmt.Fprintf(stdout, "filler: grew to %d MiB in %s\n", cfg.growTo, time.Since(start))
				achieved()
				grow = nil
			}
		}
	}
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("filler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int64Var(&c.stepMiB, "step-mib", 0, "MiB to allocate in one call on each SIGUSR1")
	fs.Float64Var(&c.growRate, "grow-mib-per-sec", 0, "grow at this rate from the start, MiB/s")
	fs.BoolVar(&c.fastest, "grow-fastest", false, "grow as fast as the kernel charges pages from the start")
	fs.Int64Var(&c.growTo, "grow-to-mib", 0, "stop growing at this total, MiB")
	fs.BoolVar(&c.ignoreTerm, "ignore-term", false, "go on through SIGTERM and SIGINT, until SIGKILL")
	fs.StringVar(&c.cacheFile, "cache-file", "", "file to write --cache-mib MiB to before anything else")
	fs.Int64Var(&c.cacheMiB, "cache-mib", 0, "MiB of page cache to write to --cache-file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	const maxMiB = 1 << 20
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.stepMiB < 0 || c.stepMiB > maxMiB:
		return c, fmt.Errorf("--step-mib=%d: want 0 to %d", c.stepMiB, maxMiB)
	case c.growRate < 0 || c.growRate > 1e6:
		return c, fmt.Errorf("--grow-mib-per-sec=%g: want 0 to 1e6", c.growRate)
	case c.fastest && c.growRate > 0:
		return c, fmt.Errorf("--grow-fastest and --grow-mib-per-sec=%g: give one", c.growRate)
	case (c.growRate > 0 || c.fastest) && (c.growTo <= 0 || c.growTo > maxMiB):
		return c, fmt.Errorf("--grow-to-mib=%d: want 1 to %d with --grow-mib-per-sec or --grow-fastest", c.growTo, maxMiB)
	case c.growRate == 0 && !c.fastest && c.growTo != 0:
		return c, fmt.Errorf("--grow-to-mib=%d: needs --grow-mib-per-sec or --grow-fastest", c.growTo)
	case c.cacheMiB < 0 || c.cacheMiB > maxMiB:
		return c, fmt.Errorf("--cache-mib=%d: want 0 to %d", c.cacheMiB, maxMiB)
	case (c.cacheMiB > 0) != (c.cacheFile != ""):
		return c, fmt.Errorf("--cache-mib=%d and --cache-file=%q: give both or neither", c.cacheMiB, c.cacheFile)
	case c.stepMiB == 0 && c.growRate == 0 && !c.fastest:
		return c, errors.New("nothing to do: give --step-mib, --grow-mib-per-sec or --grow-fastest")
	}
	return c, nil
}

// writeCache writes n MiB to path and syncs it, so the pages are clean cache
// the kernel can reclaim without writing them.
func writeCache(path string, n int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, mib)
	for i := range buf {
		buf[i] = byte(i) // not zeros: nothing may store them sparsely
	}
	for range n {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}
