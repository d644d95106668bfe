// SPDX-License-Identifier: Apache-2.0

package cliflag

import (
	"strings"
	"testing"
	"time"
)

func TestSectionsParseTogetherAndPrintApart(t *testing.T) {
	var s Sections
	var level string
	var every time.Duration
	s.Section("observation").DurationVar(&every, "every", time.Second, "How often.")
	s.Section("logging").StringVar(&level, "level", "info", "Log level.")
	if first := s.Section("observation"); s.Section("observation") != first {
		t.Fatal("a second Section call made a new flag set")
	}
	fs := s.FlagSet("cmd")
	if err := fs.Parse([]string{"--level=debug", "--every=2s"}); err != nil {
		t.Fatal(err)
	}
	if level != "debug" || every != 2*time.Second || !s.Section("logging").Lookup("level").Changed {
		t.Errorf("level %q, every %v: the sections' values were not set", level, every)
	}
	var b strings.Builder
	if err := s.Write(&b, 0); err != nil {
		t.Fatal(err)
	}
	want := "\nObservation flags:\n\n      --every duration   How often. (default 1s)\n" +
		"\nLogging flags:\n\n      --level string   Log level. (default \"info\")\n"
	if b.String() != want {
		t.Errorf("help:\n%s\nwant:\n%s", b.String(), want)
	}
	if err := fs.Parse([]string{"--lvl=x"}); err == nil || err.Error() != "unknown flag: --lvl" {
		t.Errorf("unknown flag: error %v", err)
	}
}
