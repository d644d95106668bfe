// SPDX-License-Identifier: Apache-2.0

package main

import (
	promversion "github.com/prometheus/common/version"

	"github.com/evictd/evictd/internal/buildinfo"
)

// publishVersion hands what this binary was built from to
// prometheus/common/version, whose globals Prometheus' libraries read (its
// version collector, its user agents), so they say what `evictd version`
// says. The Makefile stamps main's variables, not the library's: buildinfo
// fills in what a plain go build or go install left unstamped, which the
// library cannot. Called once from main, before anything reads them.
func publishVersion(i buildinfo.Info) {
	promversion.Version = i.Version
	promversion.Revision = i.Revision
	promversion.BuildDate = i.Date
	promversion.GoVersion = i.GoVersion
}
