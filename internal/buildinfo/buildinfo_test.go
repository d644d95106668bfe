// SPDX-License-Identifier: Apache-2.0

package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/evictd/evictd", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-24T17:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tt := range []struct {
		name string
		s    Stamped
		bi   *debug.BuildInfo
		want Info
	}{
		{"stamped by make", Stamped{Version: "v0.4.0-3-gfeedbee", Revision: "feedbee", Date: "2026-11-20T10:00:00Z"}, vcs,
			Info{Version: "v0.4.0-3-gfeedbee", Revision: "feedbee", Date: "2026-11-20T10:00:00Z", GoVersion: "go1.26.8"}},
		{"plain go build in a checkout", Stamped{Version: "dev"}, vcs,
			Info{Version: "dev", Revision: "0123456789abcdef0123456789abcdef01234567", Modified: true, Date: "2026-11-24T17:00:00Z", GoVersion: "go1.26.8"}},
		{"go install of a release", Stamped{}, &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.5.0"}},
			Info{Version: "v0.5.0", GoVersion: "go1.26.8"}},
		{"nothing recorded", Stamped{}, nil, Info{Version: "dev"}},
	} {
		got := Resolve(tt.s, tt.bi)
		got.Platform = ""
		if tt.bi == nil {
			got.GoVersion = "" // the running toolchain's
		}
		if got != tt.want {
			t.Errorf("%s: Resolve = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestString(t *testing.T) {
	s := Info{Version: "v1", Revision: "abc", Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"}.String()
	for _, want := range []string{"version:  v1\n", "revision: abc (with uncommitted changes)\n", "date:     unknown\n", "go:       go1.26.8 linux/arm64\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}
