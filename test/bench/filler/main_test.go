// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args    []string
		want    config
		wantErr string
	}{
		{[]string{"--step-mib=300"}, config{stepMiB: 300}, ""},
		{[]string{"--grow-mib-per-sec=1000", "--grow-to-mib=1024"}, config{growRate: 1000, growTo: 1024}, ""},
		{[]string{"--grow-fastest", "--grow-to-mib=1024"}, config{fastest: true, growTo: 1024}, ""},
		{[]string{"--grow-fastest"}, config{}, "--grow-to-mib=0"},
		{[]string{"--grow-fastest", "--grow-mib-per-sec=10", "--grow-to-mib=1"}, config{}, "give one"},
		{[]string{"--grow-fastest", "--grow-to-mib=8", "--ignore-term"}, config{fastest: true, growTo: 8, ignoreTerm: true}, ""},
		{nil, config{}, "nothing to do"},
		{[]string{"--step-mib=-1"}, config{}, "--step-mib=-1"},
		{[]string{"--grow-mib-per-sec=100"}, config{}, "--grow-to-mib=0"},
		{[]string{"--grow-to-mib=10"}, config{}, "needs --grow-mib-per-sec"},
		{[]string{"--step-mib=1", "extra"}, config{}, `unexpected argument "extra"`},
		{[]string{"--step-mib=x"}, config{}, "invalid value"},
		{[]string{"--step-mib=1", "--cache-file=/c", "--cache-mib=64"}, config{stepMiB: 1, cacheFile: "/c", cacheMiB: 64}, ""},
		{[]string{"--step-mib=1", "--cache-mib=64"}, config{}, `--cache-file=""`},
		{[]string{"--step-mib=1", "--cache-file=/c"}, config{}, "give both or neither"},
		{[]string{"--step-mib=1", "--cache-file=/c", "--cache-mib=-2"}, config{}, "--cache-mib=-2"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestWriteCache(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cache")
	if err := writeCache(p, 3); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Size() != 3<<20 {
		t.Fatalf("stat = %v, %v; want a file of %d bytes", st, err, 3<<20)
	}
	if err := writeCache(filepath.Join(p, "under-a-file"), 1); err == nil {
		t.Fatal("writeCache under a regular file: no error")
	}
}

// The fastest growth maps what it was asked for and reports the rate it
// achieved from its own calls; SIGTERM then ends it at once.
func TestGrowFastestReportsItsRate(t *testing.T) {
	r, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"--grow-fastest", "--grow-to-mib=64"}, w, io.Discard)
		w.Close()
	}()
	sc := bufio.NewScanner(r)
	var rate float64
	var mibs int
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "filler: achieved %f MiB/s (%d MiB in", &rate, &mibs); err == nil {
			break
		}
	}
	if rate <= 0 || mibs != 64 {
		t.Fatalf("achieved %v MiB/s over %d MiB; want a positive rate over 64 MiB", rate, mibs)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5 s after SIGTERM")
	}
}

// With --ignore-term, SIGTERM neither ends the growth nor the filler: it
// says so and grows on.
func TestIgnoreTermGrowsThroughSIGTERM(t *testing.T) {
	r, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"--grow-mib-per-sec=400", "--grow-to-mib=16", "--ignore-term"}, w, io.Discard)
		w.Close()
	}()
	sc := bufio.NewScanner(r)
	if !sc.Scan() || sc.Text() != "filler: ready" {
		t.Fatalf("first line %q, want filler: ready", sc.Text())
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "filler: grew to 16 MiB") {
			break
		}
	}
	if len(lines) == 0 || lines[0] != "filler: terminated ignored" {
		t.Errorf("lines after SIGTERM %q; want it ignored first, then the growth to its end", lines)
	}
	if !strings.HasPrefix(lines[len(lines)-1], "filler: grew to 16 MiB") {
		t.Errorf("lines after SIGTERM %q; the growth did not reach 16 MiB", lines)
	}
	select {
	case code := <-done:
		t.Fatalf("the filler exited (%d) after an ignored SIGTERM", code)
	default:
	}
}
