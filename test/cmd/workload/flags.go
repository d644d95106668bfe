// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// dirEnv names the emptyDir the stand-in gives the container; it is the
// default of --write-dir.
const dirEnv = "WORKLOAD_DIR"

var errHelp = errors.New("help requested")

type config struct {
	holdMiB        int64
	growMiBPerSec  float64
	growToMiB      int64
	burstMiB       int64
	bursts         int
	burstDelay     time.Duration
	burstInterval  time.Duration
	writeMiB       int64
	writeDir       string
	writeMiBPerSec float64
	rereadMiB      int64
	rereadDir      string
	rereadReaders  int
	churnMiB       int64
	churnPause     time.Duration
	procs          int
	termDelay      time.Duration
	ignoreTerm     bool
	exitAfter      time.Duration
	child          bool
	logMiB         int64
	files          int
}

// maxMiB bounds every size flag so a typo cannot ask for exabytes; 1 TiB is
// far beyond any test node.
const maxMiB = 1 << 20

func parseFlags(args []string, getenv func(string) string) (config, error) {
	var c config
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int64Var(&c.holdMiB, "hold-mib", 0, "anonymous memory to allocate and touch at start, MiB")
	fs.Float64Var(&c.growMiBPerSec, "grow-mib-per-sec", 0, "after the hold, grow memory at this rate, MiB/s")
	fs.Int64Var(&c.growToMiB, "grow-to-mib", 0, "stop growing at this total, MiB (needed with --grow-mib-per-sec)")
	fs.Int64Var(&c.burstMiB, "burst-mib", 0, "after the hold, allocate this much in each burst, as fast as possible, MiB")
	fs.IntVar(&c.bursts, "bursts", 0, "how many bursts of --burst-mib; then hold everything")
	fs.DurationVar(&c.burstDelay, "burst-delay", 0, "time from the hold to the first burst")
	fs.DurationVar(&c.burstInterval, "burst-interval", 0, "time from one burst's start to the next (needed with more than one burst)")
	fs.Int64Var(&c.writeMiB, "write-mib", 0, "data to write into --write-dir, MiB")
	fs.StringVar(&c.writeDir, "write-dir", getenv(dirEnv), "directory for --write-mib (default $"+dirEnv+")")
	fs.Float64Var(&c.writeMiBPerSec, "write-mib-per-sec", 0, "write rate, MiB/s (0: as fast as possible)")
	fs.Int64Var(&c.rereadMiB, "reread-mib", 0, "write a file of this size into --reread-dir once, then re-read it in a loop forever, MiB")
	fs.IntVar(&c.rereadReaders, "reread-readers", 0, "readers of the --reread-mib file at once, each over its own share of it (0: one)")
	fs.StringVar(&c.rereadDir, "reread-dir", getenv(dirEnv), "directory for --reread-mib, on a disk-backed filesystem (default $"+dirEnv+")")
	fs.Int64Var(&c.churnMiB, "churn-mib", 0, "after the hold, map this much, touch it, unmap it, over and over (a garbage-collected heap), MiB")
	fs.DurationVar(&c.churnPause, "churn-pause", 0, "time between one churn cycle's unmap and the next map (0: none)")
	fs.Int64Var(&c.logMiB, "log-mib", 0, "text to print to stdout at start, MiB (the container's log)")
	fs.IntVar(&c.files, "files", 0, "empty files to create in --write-dir at start (inodes)")
	fs.IntVar(&c.procs, "procs", 0, "extra child processes to spawn")
	fs.DurationVar(&c.termDelay, "term-delay", 0, "how long to keep running after SIGTERM")
	fs.BoolVar(&c.ignoreTerm, "ignore-term", false, "go on through SIGTERM (growing, churning, holding) until SIGKILL, as a container's PID 1 without a handler does")
	fs.DurationVar(&c.exitAfter, "exit-after", 0, "exit 0 after this long (0: run until signalled)")
	fs.BoolVar(&c.child, "child", false, "internal: run as a spawned child process")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(nil)
			fs.PrintDefaults()
			return c, errHelp
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, c.validate()
}

func (c config) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"--hold-mib", c.holdMiB}, {"--grow-to-mib", c.growToMiB}, {"--write-mib", c.writeMiB}, {"--burst-mib", c.burstMiB}, {"--log-mib", c.logMiB}, {"--reread-mib", c.rereadMiB}, {"--churn-mib", c.churnMiB}} {
		if f.v < 0 || f.v > maxMiB {
			return fmt.Errorf("%s=%d: must be between 0 and %d", f.name, f.v, maxMiB)
		}
	}
	switch {
	case c.growMiBPerSec < 0:
		return fmt.Errorf("--grow-mib-per-sec=%g: must not be negative", c.growMiBPerSec)
	case c.growMiBPerSec > 0 && c.growToMiB <= c.holdMiB:
		return fmt.Errorf("--grow-to-mib=%d: must be above --hold-mib=%d when growing", c.growToMiB, c.holdMiB)
	case c.growMiBPerSec == 0 && c.growToMiB > 0:
		return fmt.Errorf("--grow-to-mib=%d: needs --grow-mib-per-sec", c.growToMiB)
	case c.bursts < 0 || c.bursts > 1000:
		return fmt.Errorf("--bursts=%d: must be between 0 and 1000", c.bursts)
	case c.bursts > 0 && c.burstMiB == 0:
		return fmt.Errorf("--bursts=%d: needs --burst-mib", c.bursts)
	case c.burstMiB > 0 && c.bursts == 0:
		return fmt.Errorf("--burst-mib=%d: needs --bursts", c.burstMiB)
	case c.bursts > 0 && c.growMiBPerSec > 0:
		return fmt.Errorf("--bursts=%d: cannot be combined with --grow-mib-per-sec", c.bursts)
	case c.bursts > 0 && c.holdMiB+int64(c.bursts)*c.burstMiB > maxMiB:
		return fmt.Errorf("--bursts=%d of --burst-mib=%d: more than %d MiB in all", c.bursts, c.burstMiB, maxMiB)
	case c.burstDelay < 0:
		return fmt.Errorf("--burst-delay=%s: must not be negative", c.burstDelay)
	case c.burstInterval < 0:
		return fmt.Errorf("--burst-interval=%s: must not be negative", c.burstInterval)
	case c.bursts > 1 && c.burstInterval == 0:
		return fmt.Errorf("--bursts=%d: needs --burst-interval", c.bursts)
	case c.writeMiBPerSec < 0:
		return fmt.Errorf("--write-mib-per-sec=%g: must not be negative", c.writeMiBPerSec)
	case c.writeMiB > 0 && c.writeDir == "":
		return fmt.Errorf("--write-mib=%d: needs --write-dir or $%s", c.writeMiB, dirEnv)
	case c.rereadReaders < 0 || c.rereadReaders > 64:
		return fmt.Errorf("--reread-readers=%d: must be between 0 and 64", c.rereadReaders)
	case c.rereadMiB > 0 && c.rereadDir == "":
		return fmt.Errorf("--reread-mib=%d: needs --reread-dir or $%s", c.rereadMiB, dirEnv)
	case c.churnPause < 0:
		return fmt.Errorf("--churn-pause=%s: must not be negative", c.churnPause)
	case c.churnPause > 0 && c.churnMiB == 0:
		return fmt.Errorf("--churn-pause=%s: needs --churn-mib", c.churnPause)
	case c.files < 0 || c.files > 10_000_000:
		return fmt.Errorf("--files=%d: must be between 0 and 10000000", c.files)
	case c.files > 0 && c.writeDir == "":
		return fmt.Errorf("--files=%d: needs --write-dir or $%s", c.files, dirEnv)
	case c.procs < 0 || c.procs > 10000:
		return fmt.Errorf("--procs=%d: must be between 0 and 10000", c.procs)
	case c.termDelay < 0:
		return fmt.Errorf("--term-delay=%s: must not be negative", c.termDelay)
	case c.ignoreTerm && c.termDelay > 0:
		return fmt.Errorf("--ignore-term and --term-delay=%s: give one", c.termDelay)
	case c.exitAfter < 0:
		return fmt.Errorf("--exit-after=%s: must not be negative", c.exitAfter)
	}
	return nil
}

// peakMiB is the most anonymous memory the workload will ever touch.
func (c config) peakMiB() int64 {
	return max(c.holdMiB, c.growToMiB, c.holdMiB+int64(c.bursts)*c.burstMiB)
}
