// SPDX-License-Identifier: Apache-2.0

package cgrouptest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The child reads one command a line on stdin and answers each with one
// line on stdout:
//
//	touch MIB                     -> touched START END CROSSED LAST | error MSG
//	touch MIB THRESHOLD FILE      -> the same, watching FILE while touching
//	stall MILLIS FILE             -> stalling | error MSG
//
// Paths come last so that they may hold spaces. A stall answers when it
// starts and reads the next command only once it is over.

// command is one request to the child.
type command struct {
	op        string // "touch" or "stall"
	mib       int    // touch: how much anonymous memory to map and touch
	threshold int64  // touch with a watch: the value to report reaching
	file      string // touch: the file to watch, if any; stall: the file to read
	stall     time.Duration
}

func (c command) String() string {
	switch {
	case c.op == "stall":
		return fmt.Sprintf("stall %d %s", c.stall.Milliseconds(), c.file)
	case c.file != "":
		return fmt.Sprintf("touch %d %d %s", c.mib, c.threshold, c.file)
	default:
		return fmt.Sprintf("touch %d", c.mib)
	}
}

func parseCommand(line string) (command, error) {
	op, rest, _ := strings.Cut(line, " ")
	switch op {
	case "touch":
		f := strings.SplitN(rest, " ", 3)
		mib, err := strconv.Atoi(f[0])
		if err != nil || mib <= 0 {
			return command{}, fmt.Errorf("touch: %q is not a positive number of MiB", f[0])
		}
		c := command{op: op, mib: mib}
		if len(f) == 1 {
			return c, nil
		}
		if len(f) != 3 || f[2] == "" {
			return command{}, fmt.Errorf("touch: %q names a threshold but no file to watch", line)
		}
		if c.threshold, err = strconv.ParseInt(f[1], 10, 64); err != nil || c.threshold <= 0 {
			return command{}, fmt.Errorf("touch: threshold %q is not a positive number of bytes", f[1])
		}
		c.file = f[2]
		return c, nil
	case "stall":
		ms, file, _ := strings.Cut(rest, " ")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n <= 0 {
			return command{}, fmt.Errorf("stall: %q is not a positive number of milliseconds", ms)
		}
		if file == "" {
			return command{}, fmt.Errorf("stall: %q names no file to read", line)
		}
		return command{op: op, stall: time.Duration(n) * time.Millisecond, file: file}, nil
	}
	return command{}, fmt.Errorf("unknown command %q", line)
}

// Touched is the child's account of one touch.
type Touched struct {
	// Start and End bracket the page faults.
	Start, End Mono
	// Crossed is when a read of the watched file first found it at or above
	// the threshold; zero when it never did, or nothing was watched.
	Crossed Mono
	// Last is the last value read from the watched file.
	Last int64
}

func (t Touched) String() string {
	return fmt.Sprintf("touched %d %d %d %d", t.Start, t.End, t.Crossed, t.Last)
}

func parseTouched(line string) (Touched, error) {
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		return Touched{}, fmt.Errorf("child: %s", msg)
	}
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != "touched" {
		return Touched{}, fmt.Errorf("child answered %q, want \"touched START END CROSSED LAST\"", line)
	}
	var v [4]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return Touched{}, fmt.Errorf("child answered %q: field %d is not a number", line, i+1)
		}
		v[i] = n
	}
	return Touched{Start: Mono(v[0]), End: Mono(v[1]), Crossed: Mono(v[2]), Last: v[3]}, nil
}
