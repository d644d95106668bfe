// SPDX-License-Identifier: Apache-2.0

// Package buildinfo says what an evictd binary was built from: the version,
// revision and date the build stamped in (-ldflags -X, see the Makefile),
// or else what the Go toolchain recorded on its own (debug.ReadBuildInfo:
// the module's version, and vcs.revision, vcs.time and vcs.modified for a
// build inside a git checkout), so that a plain `go build` or `go install`
// still says where it came from.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is one binary's origin. Empty fields are unknown.
type Info struct {
	// Version is the release version make stamps from the VERSION file
	// (e.g. 0.1.0), or the module version go install recorded.
	Version string
	// Revision is the full commit hash.
	Revision string
	// Modified: the tree had uncommitted changes.
	Modified bool
	// Date is when the revision was committed (RFC 3339): the build date of
	// a reproducible build, which the same commit always gives.
	Date      string
	GoVersion string
	Platform  string // GOOS/GOARCH
}

// Stamped is what the build's -ldflags -X set: Version, Revision, Date, and
// Modified as "true" or "".
type Stamped struct{ Version, Revision, Date, Modified string }

// Read combines the stamped values with the toolchain's record of this
// binary.
func Read(s Stamped) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return Resolve(s, bi)
}

// Resolve prefers what the build stamped, field by field, and falls back to
// bi (nil when the binary carries none).
func Resolve(s Stamped, bi *debug.BuildInfo) Info {
	i := Info{Version: s.Version, Revision: s.Revision, Date: s.Date, Modified: s.Modified == "true",
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return i.withDefaults()
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	if i.Version == "" || i.Version == "dev" {
		// "(devel)" is what a build inside the module's own tree records.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			i.Version = v
		}
	}
	settings := map[string]string{}
	for _, kv := range bi.Settings {
		settings[kv.Key] = kv.Value
	}
	if i.Revision == "" {
		i.Revision = settings["vcs.revision"]
		i.Modified = settings["vcs.modified"] == "true"
	}
	if i.Date == "" {
		i.Date = settings["vcs.time"]
	}
	return i.withDefaults()
}

func (i Info) withDefaults() Info {
	if i.Version == "" {
		i.Version = "dev"
	}
	return i
}

// String is the output of `evictd version`: one "key: value" line each.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version:  %s\n", i.Version)
	rev := orUnknown(i.Revision)
	if i.Modified {
		rev += " (with uncommitted changes)"
	}
	fmt.Fprintf(&b, "revision: %s\n", rev)
	fmt.Fprintf(&b, "date:     %s\n", orUnknown(i.Date))
	fmt.Fprintf(&b, "go:       %s %s\n", i.GoVersion, i.Platform)
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
