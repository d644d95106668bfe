// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	promversion "github.com/prometheus/common/version"

	"github.com/evictd/evictd/internal/buildinfo"
)

// TestPublishVersion: the library's globals say what `evictd version` says.
// Not parallel: it writes process-wide variables.
func TestPublishVersion(t *testing.T) {
	saved := [4]string{promversion.Version, promversion.Revision, promversion.BuildDate, promversion.GoVersion}
	t.Cleanup(func() {
		promversion.Version, promversion.Revision, promversion.BuildDate, promversion.GoVersion = saved[0], saved[1], saved[2], saved[3]
	})
	publishVersion(buildinfo.Info{Version: "v1.2.3", Revision: "0123abc", Date: "2026-11-25T09:00:00Z", GoVersion: "go1.26.9"})
	for name, got := range map[string][2]string{
		"Version":   {promversion.Version, "v1.2.3"},
		"Revision":  {promversion.GetRevision(), "0123abc"},
		"BuildDate": {promversion.BuildDate, "2026-11-25T09:00:00Z"},
		"GoVersion": {promversion.GoVersion, "go1.26.9"},
	} {
		if got[0] != got[1] {
			t.Errorf("version.%s = %q, want %q", name, got[0], got[1])
		}
	}
}
