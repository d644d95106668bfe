// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/evictd/evictd/test/vmnode/guestmem"
	"github.com/evictd/evictd/test/vmnode/vmapi"
)

// runCrossing reads memory.available (guestmem) every --interval until it
// falls below --below, then prints a Crossing as JSON. The command after the
// flags, if any, is started once the first read is done, so that whatever it
// sets off (a step of memory) is timed from a read before it.
func runCrossing(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("crossing", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	below := fs.Int64("below", 0, "level in bytes: report when memory.available falls below it")
	interval := fs.Duration("interval", time.Millisecond, "time between reads")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "vmagent crossing: %v; %s\n", err, usage)
		return exitUsage
	}
	if *below <= 0 || *interval <= 0 || *timeout <= 0 {
		fmt.Fprintf(stderr, "vmagent crossing: --below, --interval and --timeout must be positive (got %d, %s, %s); %s\n", *below, *interval, *timeout, usage)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := watchCrossing(ctx, guestmem.Files, *below, *interval, time.Now, fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "vmagent crossing: %v\n", err)
		return exitFail
	}
	if err := json.NewEncoder(stdout).Encode(c); err != nil {
		fmt.Fprintf(stderr, "vmagent crossing: %v\n", err)
		return exitFail
	}
	return exitOK
}

// triggerWait bounds the wait for the trigger's output once the watch has
// timed out.
const triggerWait = 10 * time.Second

// watchCrossing does the work of runCrossing on the given files (guestmem's,
// in that order); now stamps each read (time.Now: a test's clock counts the
// reads, so that its verdict on which reads bracket the crossing does not
// depend on how fast the host ran them).
func watchCrossing(ctx context.Context, paths []string, below int64, interval time.Duration, now func() time.Time, trigger []string) (vmapi.Crossing, error) {
	// One locked thread and open files read with pread: a read costs no
	// allocation of descriptors, so a 1 ms interval stays cheap.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var files []*os.File
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return vmapi.Crossing{}, err
		}
		defer f.Close()
		files = append(files, f)
	}
	buf := make([]byte, 0, 16<<10)
	chunk := make([]byte, 8<<10)
	read := func() (int64, error) {
		buf = buf[:0]
		for _, f := range files {
			for off := int64(0); ; {
				n, err := f.ReadAt(chunk, off)
				buf = append(buf, chunk[:n]...)
				off += int64(n)
				if errors.Is(err, io.EOF) || n == 0 {
					break
				}
				if err != nil {
					return 0, fmt.Errorf("read %s: %w", f.Name(), err)
				}
			}
			buf = append(buf, '\n')
		}
		return guestmem.Available(buf)
	}
	var c vmapi.Crossing
	var trig chan string
	var lastAbove time.Time
	for {
		start := now()
		v, err := read()
		if err != nil {
			return c, err
		}
		c.Reads++
		if c.Reads == 1 {
			c.Before = v
		}
		if v < below {
			c.AtUnixNano, c.Available = start.UnixNano(), v
			if !lastAbove.IsZero() {
				c.LastAboveUnixNano = lastAbove.UnixNano()
			}
			if trig != nil {
				c.Trigger = <-trig
			}
			return c, nil
		}
		lastAbove = start
		if trig == nil && len(trigger) > 0 {
			trig = make(chan string, 1)
			go func() {
				out, err := exec.CommandContext(ctx, trigger[0], trigger[1:]...).CombinedOutput()
				if err != nil {
					out = append(out, []byte(" ("+err.Error()+")")...)
				}
				trig <- string(out)
			}()
		}
		select {
		case <-ctx.Done():
			// The trigger is killed with ctx (CommandContext): its answer,
			// what it said until then, comes soon; waited for, boundedly, so
			// that a slow start of it does not lose what it said.
			msg := ""
			if trig != nil {
				select {
				case msg = <-trig:
					msg = "; trigger said " + strconv.Quote(msg)
				case <-time.After(triggerWait):
					msg = fmt.Sprintf("; trigger did not end within %s of the timeout", triggerWait)
				}
			}
			return c, fmt.Errorf("memory.available stayed at or above %d (last %d after %d reads)%s: %w", below, v, c.Reads, msg, ctx.Err())
		default:
		}
		time.Sleep(interval)
	}
}
