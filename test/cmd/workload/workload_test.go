// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string
	}{
		{name: "empty", want: config{}},
		{name: "hold and grow", args: []string{"--hold-mib=10", "--grow-mib-per-sec=2.5", "--grow-to-mib=30"},
			want: config{holdMiB: 10, growMiBPerSec: 2.5, growToMiB: 30}},
		{name: "write dir from env", args: []string{"--write-mib=5"}, env: map[string]string{dirEnv: "/d"},
			want: config{writeMiB: 5, writeDir: "/d", rereadDir: "/d"}},
		{name: "flag beats env", args: []string{"--write-mib=5", "--write-dir=/x"}, env: map[string]string{dirEnv: "/d"},
			want: config{writeMiB: 5, writeDir: "/x", rereadDir: "/d"}},
		{name: "reread", args: []string{"--reread-mib=256", "--reread-dir=/data"}, want: config{rereadMiB: 256, rereadDir: "/data"}},
		{name: "reread dir from env", args: []string{"--reread-mib=96"}, env: map[string]string{dirEnv: "/d"},
			want: config{rereadMiB: 96, rereadDir: "/d", writeDir: "/d"}},
		{name: "reread readers", args: []string{"--reread-mib=160", "--reread-dir=/data", "--reread-readers=4"},
			want: config{rereadMiB: 160, rereadDir: "/data", rereadReaders: 4}},
		{name: "too many readers", args: []string{"--reread-mib=8", "--reread-dir=/d", "--reread-readers=65"}, wantErr: "--reread-readers=65"},
		{name: "negative readers", args: []string{"--reread-readers=-1"}, wantErr: "--reread-readers=-1"},
		{name: "reread without dir", args: []string{"--reread-mib=8"}, wantErr: "--reread-mib=8: needs --reread-dir"},
		{name: "negative reread", args: []string{"--reread-mib=-1", "--reread-dir=/d"}, wantErr: "--reread-mib=-1"},
		{name: "huge reread", args: []string{"--reread-mib=99999999", "--reread-dir=/d"}, wantErr: "--reread-mib=99999999"},
		{name: "procs and delays", args: []string{"--procs=3", "--term-delay=2s", "--exit-after=1m"},
			want: config{procs: 3, termDelay: 2 * time.Second, exitAfter: time.Minute}},
		{name: "negative hold", args: []string{"--hold-mib=-1"}, wantErr: "--hold-mib=-1"},
		{name: "huge hold", args: []string{"--hold-mib=99999999"}, wantErr: "--hold-mib=99999999"},
		{name: "grow without cap", args: []string{"--grow-mib-per-sec=1"}, wantErr: "--grow-to-mib=0"},
		{name: "cap below hold", args: []string{"--hold-mib=10", "--grow-mib-per-sec=1", "--grow-to-mib=5"}, wantErr: "--grow-to-mib=5"},
		{name: "cap without rate", args: []string{"--grow-to-mib=5"}, wantErr: "needs --grow-mib-per-sec"},
		{name: "write without dir", args: []string{"--write-mib=1"}, wantErr: "--write-mib=1"},
		{name: "negative procs", args: []string{"--procs=-2"}, wantErr: "--procs=-2"},
		{name: "not a number", args: []string{"--hold-mib=ten"}, wantErr: "ten"},
		{name: "stray argument", args: []string{"extra"}, wantErr: `"extra"`},
		{name: "negative delay", args: []string{"--term-delay=-1s"}, wantErr: "--term-delay=-1s"},
		{name: "ignore term", args: []string{"--grow-mib-per-sec=40", "--grow-to-mib=900", "--ignore-term"},
			want: config{growMiBPerSec: 40, growToMiB: 900, ignoreTerm: true}},
		{name: "ignore term and a term delay", args: []string{"--ignore-term", "--term-delay=1s"}, wantErr: "give one"},
		{name: "bursts", args: []string{"--hold-mib=8", "--burst-mib=100", "--bursts=3", "--burst-delay=1s", "--burst-interval=300ms"},
			want: config{holdMiB: 8, burstMiB: 100, bursts: 3, burstDelay: time.Second, burstInterval: 300 * time.Millisecond}},
		{name: "one burst needs no interval", args: []string{"--burst-mib=100", "--bursts=1"}, want: config{burstMiB: 100, bursts: 1}},
		{name: "bursts without size", args: []string{"--bursts=2", "--burst-interval=1s"}, wantErr: "needs --burst-mib"},
		{name: "burst size without count", args: []string{"--burst-mib=10"}, wantErr: "needs --bursts"},
		{name: "several bursts without interval", args: []string{"--burst-mib=10", "--bursts=2"}, wantErr: "needs --burst-interval"},
		{name: "bursts and growth", args: []string{"--burst-mib=10", "--bursts=1", "--grow-mib-per-sec=1", "--grow-to-mib=5"},
			wantErr: "cannot be combined"},
		{name: "too many bursts", args: []string{"--burst-mib=10", "--bursts=1001", "--burst-interval=1s"}, wantErr: "--bursts=1001"},
		{name: "bursts too large in all", args: []string{"--burst-mib=600000", "--bursts=2", "--burst-interval=1s"}, wantErr: "in all"},
		{name: "negative burst interval", args: []string{"--burst-mib=10", "--bursts=2", "--burst-interval=-1s"}, wantErr: "--burst-interval=-1s"},
		{name: "negative burst delay", args: []string{"--burst-mib=10", "--bursts=1", "--burst-delay=-1s"}, wantErr: "--burst-delay=-1s"},
		{name: "churn", args: []string{"--hold-mib=200", "--churn-mib=40", "--churn-pause=50ms"},
			want: config{holdMiB: 200, churnMiB: 40, churnPause: 50 * time.Millisecond}},
		{name: "negative churn", args: []string{"--churn-mib=-1"}, wantErr: "--churn-mib=-1"},
		{name: "huge churn", args: []string{"--churn-mib=99999999"}, wantErr: "--churn-mib=99999999"},
		{name: "negative churn pause", args: []string{"--churn-mib=1", "--churn-pause=-1s"}, wantErr: "--churn-pause=-1s"},
		{name: "churn pause without churn", args: []string{"--churn-pause=1s"}, wantErr: "--churn-pause=1s: needs --churn-mib"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFlags(tt.args, env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRunTouchesAndWrites runs the workload in-process and checks the pages
// it touched (resident memory growth) and the bytes it wrote.
func TestRunTouchesAndWrites(t *testing.T) {
	tests := []struct {
		name      string
		cfg       config
		wantMiB   int64 // touched memory at the end
		wantWrite int64 // MiB on disk
		exitBy    time.Duration
	}{
		{name: "hold", cfg: config{holdMiB: 16, exitAfter: 300 * time.Millisecond}, wantMiB: 16},
		{name: "grow to cap", cfg: config{holdMiB: 4, growMiBPerSec: 100, growToMiB: 24, exitAfter: 700 * time.Millisecond}, wantMiB: 24},
		{name: "write", cfg: config{writeMiB: 3, exitAfter: 500 * time.Millisecond}, wantWrite: 3},
		{name: "write at a rate", cfg: config{writeMiB: 2, writeMiBPerSec: 20, exitAfter: 600 * time.Millisecond}, wantWrite: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.cfg.writeDir = dir
			var out bytes.Buffer
			w := newWorkload(tt.cfg, &out)
			if err := w.run(context.Background(), make(chan os.Signal)); err != nil {
				t.Fatal(err)
			}
			if got := w.touched; got < tt.wantMiB*mib || got > tt.wantMiB*mib+int64(w.pageSize) {
				t.Errorf("touched %d bytes, want %d MiB", got, tt.wantMiB)
			}
			var written int64
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, f := range files {
				st, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				written += st.Size()
			}
			if written != tt.wantWrite*mib {
				t.Errorf("wrote %d bytes, want %d MiB; output:\n%s", written, tt.wantWrite, out.String())
			}
		})
	}
}

// TestBursts runs three bursts in-process: each touches its share at once,
// they start the interval apart, and then the memory is held.
func TestBursts(t *testing.T) {
	cfg := config{holdMiB: 4, burstMiB: 16, bursts: 3, burstDelay: 100 * time.Millisecond,
		burstInterval: 300 * time.Millisecond, exitAfter: 1500 * time.Millisecond}
	var out bytes.Buffer
	w := newWorkload(cfg, &out)
	start := time.Now()
	if err := w.run(context.Background(), make(chan os.Signal)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < cfg.exitAfter {
		t.Fatalf("ran %s, want until --exit-after %s", took, cfg.exitAfter)
	}
	if want := (cfg.holdMiB + 3*cfg.burstMiB) * mib; w.touched != want {
		t.Errorf("touched %d bytes, want %d (hold + 3 bursts)", w.touched, want)
	}
	got := out.String()
	for _, line := range []string{"burst 1 of 3: 16 MiB", "burst 2 of 3: 16 MiB", "burst 3 of 3: 16 MiB", "bursts done, holding 52 MiB"} {
		if !strings.Contains(got, line) {
			t.Errorf("output lacks %q:\n%s", line, got)
		}
	}
	if strings.Count(got, "workload: burst ") != 3 {
		t.Errorf("want exactly 3 bursts:\n%s", got)
	}
}

// stampedWriter records when each line was written, and closes seen (when
// set) at the first line holding watch.
type stampedWriter struct {
	mu    sync.Mutex
	lines []string
	at    []time.Time
	watch string
	seen  chan struct{}
}

func (w *stampedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, string(p))
	w.at = append(w.at, time.Now())
	if w.seen != nil && strings.Contains(string(p), w.watch) {
		close(w.seen)
		w.seen = nil
	}
	return len(p), nil
}

func (w *stampedWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "")
}

// TestBurstSpacing: the first burst comes --burst-delay after the hold, the
// next ones --burst-interval apart. Only lower bounds: a loaded machine may
// fire any timer late, never early.
func TestBurstSpacing(t *testing.T) {
	cfg := config{burstMiB: 8, bursts: 3, burstDelay: 200 * time.Millisecond, burstInterval: 400 * time.Millisecond}
	seen := make(chan struct{})
	out := &stampedWriter{watch: "workload: bursts done", seen: seen}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- newWorkload(cfg, out).run(ctx, make(chan os.Signal)) }()
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("no \"bursts done\" line in 30s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	var held time.Time
	var bursts []time.Time
	for i, l := range out.lines {
		switch {
		case strings.HasPrefix(l, "workload: holding"):
			held = out.at[i]
		case strings.HasPrefix(l, "workload: burst "):
			bursts = append(bursts, out.at[i])
		}
	}
	if held.IsZero() || len(bursts) != 3 {
		t.Fatalf("want a hold and 3 bursts, got %q", out.lines)
	}
	// Burst i starts no sooner than the delay and i intervals after the
	// hold was said; its line comes after its start.
	for i, at := range bursts {
		if d, want := at.Sub(held), cfg.burstDelay+time.Duration(i)*cfg.burstInterval; d < want {
			t.Errorf("burst %d came %s after the hold, want at least %s", i+1, d, want)
		}
	}
}

func TestTermDelay(t *testing.T) {
	tests := []struct {
		delay time.Duration
	}{{0}, {400 * time.Millisecond}}
	for _, tt := range tests {
		t.Run(tt.delay.String(), func(t *testing.T) {
			terms := make(chan os.Signal, 1)
			terms <- syscall.SIGTERM
			start := time.Now()
			if err := newWorkload(config{termDelay: tt.delay}, &bytes.Buffer{}).run(context.Background(), terms); err != nil {
				t.Fatal(err)
			}
			// A bound below only: how much later it exits is the host's.
			if took := time.Since(start); took < tt.delay {
				t.Fatalf("exited after %s, before its %s delay", took, tt.delay)
			}
		})
	}
}

// TestTermStopsTouching: a SIGTERM that is pending while the workload owes
// memory (its hold, or growth it fell behind on) ends the touching at once,
// as Go's default disposition would end a real leaker; the pages owed are
// never charged.
func TestTermStopsTouching(t *testing.T) {
	for name, cfg := range map[string]config{
		"hold":       {holdMiB: 64},
		"hold, grow": {holdMiB: 1, growMiBPerSec: 1 << 20, growToMiB: 64},
	} {
		terms := make(chan os.Signal, 1)
		terms <- syscall.SIGTERM
		w := newWorkload(cfg, &bytes.Buffer{})
		if err := w.run(context.Background(), terms); err != nil {
			t.Fatal(err)
		}
		if w.touched > 0 {
			t.Errorf("%s: touched %d MiB after SIGTERM, want none", name, w.touched/mib)
		}
	}
}

// TestIgnoreTerm: with --ignore-term a pending SIGTERM neither stops the
// touching nor ends the workload; it says so, and reports what it holds and
// asks for from then on (a throttled grower shows there that it still asks).
func TestIgnoreTerm(t *testing.T) {
	terms := make(chan os.Signal, 1)
	terms <- syscall.SIGTERM
	// It ends when the growth is done, the event the test waits for (a
	// workload that took the SIGTERM never gets there); the 30 s
	// --exit-after is the give-up.
	out := &stampedWriter{watch: "workload: grew to 64 MiB\n", seen: make(chan struct{})}
	grown := out.seen
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-grown:
			cancel()
		case <-ctx.Done():
		}
	}()
	cfg := config{holdMiB: 1, growMiBPerSec: 1 << 20, growToMiB: 64, ignoreTerm: true, exitAfter: 30 * time.Second}
	w := newWorkload(cfg, out)
	if err := w.run(ctx, terms); err != nil {
		t.Fatal(err)
	}
	if w.touched != 64*mib {
		t.Errorf("touched %d MiB through SIGTERM, want all 64", w.touched/mib)
	}
	all := out.text()
	for _, want := range []string{
		"workload: SIGTERM ignored (--ignore-term), holding 0 MiB\n",
		"workload: growing: holding 0 MiB, asking for 1 MiB\n",
		"workload: grew to 64 MiB\n",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "exiting in") {
		t.Errorf("the workload took the SIGTERM:\n%s", all)
	}
	if strings.Contains(all, "exit-after reached") {
		t.Errorf("gave up after %s without the growth done:\n%s", cfg.exitAfter, all)
	}
}

// TestGrowTarget: growth follows the wall clock from its start, capped at
// --grow-to-mib; a report of a grower held back asks for that much.
func TestGrowTarget(t *testing.T) {
	w := newWorkload(config{holdMiB: 5, growMiBPerSec: 10, growToMiB: 100}, &bytes.Buffer{})
	w.growStart = time.Unix(1000, 0)
	for _, tt := range []struct {
		at   time.Duration
		want int64
	}{{0, 5}, {2 * time.Second, 25}, {time.Minute, 100}} {
		if got := w.growTarget(w.growStart.Add(tt.at)); got != tt.want*mib {
			t.Errorf("%s into the growth: target %d MiB, want %d", tt.at, got/mib, tt.want)
		}
	}
}

func TestRunBadUsage(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--hold-mib=x"}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "hold-mib") {
		t.Fatalf("stderr %q does not name the bad flag", stderr.String())
	}
}

// TestLog prints --log-mib of text, in whole lines, before its report.
func TestLog(t *testing.T) {
	var out bytes.Buffer
	w := newWorkload(config{logMiB: 2, exitAfter: 100 * time.Millisecond}, &out)
	if err := w.run(context.Background(), make(chan os.Signal)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	long := 0
	for _, l := range lines {
		if len(l) == logLine-1 {
			long++
		}
	}
	if long != 2<<20/logLine || !strings.Contains(out.String(), "workload: logged 2 MiB\n") {
		t.Errorf("%d lines of %d bytes and %d bytes in all; want %d and the report", long, logLine, out.Len(), 2<<20/logLine)
	}
}

// TestFiles makes --files empty files under --write-dir: that many inodes,
// plus one directory per thousand.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	w := newWorkload(config{files: 2500, writeDir: dir, exitAfter: 100 * time.Millisecond}, &out)
	if err := w.run(context.Background(), make(chan os.Signal)); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2500 || !strings.Contains(out.String(), "workload: made 2500 files") {
		t.Errorf("%d files; want 2500 and the report:\n%s", n, out.String())
	}
	if _, err := parseFlags([]string{"--files=3"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "--files=3") {
		t.Errorf("--files without a directory: %v; want an error naming it", err)
	}
}

// TestReread writes the file once and reads it back, whole, more than once,
// saying when the rereading starts; the file holds exactly --reread-mib.
func TestReread(t *testing.T) {
	for _, readers := range []int{0, 3} {
		t.Run(fmt.Sprintf("readers=%d", readers), func(t *testing.T) { testReread(t, readers) })
	}
}

func testReread(t *testing.T, readers int) {
	dir := t.TempDir()
	// It ends on the events the test needs, the rereading said and two
	// passes' worth read, with a SIGTERM (which leaves the reread loop
	// running until run returns); the 30 s --exit-after is the give-up.
	out := &stampedWriter{watch: "; rereading it from now on", seen: make(chan struct{})}
	said := out.seen
	cfg := config{rereadMiB: 4, rereadDir: dir, rereadReaders: readers, exitAfter: 30 * time.Second}
	w := newWorkload(cfg, out)
	terms := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		select {
		case <-said:
		case <-done:
			return
		}
		for w.reread.Load() < 2*4*mib {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		terms <- syscall.SIGTERM
	}()
	err := w.run(context.Background(), terms)
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "reread-*.dat"))
	if len(files) != 1 {
		t.Fatalf("files %q, want one reread file", files)
	}
	st, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 4*mib {
		t.Errorf("the file holds %d bytes, want 4 MiB", st.Size())
	}
	if got := w.reread.Load(); got < 2*4*mib {
		t.Errorf("read back %d bytes, want at least two passes over 4 MiB", got)
	}
	all := strings.Join(out.lines, "")
	for _, want := range []string{"workload: reread: writing 4 MiB to " + files[0], "; rereading it from now on"} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "reread stopped") {
		t.Errorf("the reread loop stopped:\n%s", all)
	}
	if strings.Contains(all, "exit-after reached") {
		t.Errorf("gave up after %s without two passes read:\n%s", cfg.exitAfter, all)
	}
}

// TestRereadStopsOnError: a directory it cannot write to is reported, and
// the workload keeps running until its end.
func TestRereadStopsOnError(t *testing.T) {
	var out bytes.Buffer
	w := newWorkload(config{rereadMiB: 1, rereadDir: filepath.Join(t.TempDir(), "missing"), exitAfter: 200 * time.Millisecond}, &out)
	if err := w.run(context.Background(), make(chan os.Signal)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "workload: reread stopped: ") || !strings.Contains(out.String(), "exit-after reached") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestChurn: --churn-mib maps, touches and unmaps a chunk over and over
// above the hold, as a garbage-collected heap does: the cycles go on, and
// each chunk is given back before the next, so the process's resident
// memory stays about one chunk above the hold however many cycles ran.
func TestChurn(t *testing.T) {
	const chunkMiB, cycles = 16, 5
	cfg := config{holdMiB: 4, churnMiB: chunkMiB}
	out := &stampedWriter{}
	w := newWorkload(cfg, out)
	base := residentBytes(t)
	var peak int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.run(ctx, make(chan os.Signal)) }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(30 * time.Second)
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		case <-tick.C:
			peak = max(peak, residentBytes(t)-base)
			if w.churned.Load() >= cycles {
				cancel() // the run ends, and done with it
			}
		case <-giveUp:
			t.Fatalf("%d churn cycles in 30s, want %d", w.churned.Load(), cycles)
		}
	}
	n := w.churned.Load()
	// Kept chunks would have grown the process by n*chunkMiB.
	if limit := int64(cfg.holdMiB+3*chunkMiB) * mib; peak > limit {
		t.Errorf("resident memory grew by up to %d MiB over %d cycles of %d MiB, want under %d MiB: the chunks are not given back",
			peak/mib, n, chunkMiB, limit/mib)
	}
	all := strings.Join(out.lines, "")
	for _, want := range []string{"workload: holding 4 MiB", "workload: churning 16 MiB above the hold", fmt.Sprintf("workload: churn: %d cycles", n)} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}
}

// TestChurnPause: --churn-pause spaces the cycles, so a churn meant to stay
// light does not take a CPU: the fifth cycle ends no sooner than four
// pauses after the start (a loaded machine only makes it later).
func TestChurnPause(t *testing.T) {
	const cycles = 5
	cfg := config{churnMiB: 1, churnPause: 100 * time.Millisecond}
	w := newWorkload(cfg, &stampedWriter{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.run(ctx, make(chan os.Signal)) }()
	for w.churned.Load() < cycles {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%d churn cycles in 30s, want %d", w.churned.Load(), cycles)
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := (cycles - 1) * cfg.churnPause; took < want {
		t.Errorf("%d cycles in %s with a %s pause, want at least %s", cycles, took, cfg.churnPause, want)
	}
}

// TestTermStopsChurning: SIGTERM stops the churn at once, even in the middle
// of a chunk, and nothing more is touched during the term delay: an evicted
// churner does not go on charging memory for its whole grace period.
func TestTermStopsChurning(t *testing.T) {
	terms := make(chan os.Signal, 1)
	said := make(chan struct{})
	out := &stampedWriter{watch: "workload: SIGTERM, exiting in 1s", seen: said}
	w := newWorkload(config{churnMiB: 256, termDelay: time.Second}, out)
	done := make(chan error, 1)
	go func() { done <- w.run(context.Background(), terms) }()
	for start := time.Now(); w.churnTouched.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the churn touched nothing in 30s")
		}
	}
	terms <- syscall.SIGTERM
	// The line comes once the churn has stopped: from then on nothing more
	// may be touched until the workload exits.
	select {
	case <-said:
	case <-time.After(30 * time.Second):
		t.Fatalf("no SIGTERM line in 30s:\n%s", out.text())
	}
	atTerm := w.churnTouched.Load()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30s after SIGTERM")
	}
	if later := w.churnTouched.Load(); later != atTerm {
		t.Errorf("touched %d MiB more during the term delay, want none", later-atTerm)
	}
}

// residentBytes is this process's resident set (/proc/self/statm).
func residentBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		t.Fatalf("/proc/self/statm: %q", b)
	}
	var pages int64
	if _, err := fmt.Sscan(f[1], &pages); err != nil {
		t.Fatalf("/proc/self/statm: %q: %v", b, err)
	}
	return pages * int64(os.Getpagesize())
}
