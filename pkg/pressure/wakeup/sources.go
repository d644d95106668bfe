// SPDX-License-Identifier: Apache-2.0

package wakeup

import "github.com/evictd/evictd/pkg/pressure"

// Sources says which event-driven sources to use.
type Sources struct {
	Memcg        bool
	PSI          bool
	MemoryEvents bool
}

// On keeps the sources this node can have: memcg thresholds need a v1
// memory controller (v1 or hybrid), memory.events a v2 one, PSI a kernel
// with /proc/pressure. A source it cannot have is not armed and not
// exported, so that evictd_wakeup_source_active is 0 only for a source that
// should work and does not; memcg thresholds that a read-only cgroup mount
// refuses are dropped from the export once Sync meets the EROFS.
func (s Sources) On(l pressure.Layout) Sources {
	return Sources{
		Memcg:        s.Memcg && l.Mode != pressure.ModeV2,
		MemoryEvents: s.MemoryEvents && l.Mode == pressure.ModeV2,
		PSI:          s.PSI && l.ProcPressureDir != "",
	}
}

// List names the sources that are on, with poll and kick, which always are.
func (s Sources) List() []Source {
	var out []Source
	for _, src := range []struct {
		on  bool
		src Source
	}{{s.Memcg, SourceMemcgThreshold}, {s.PSI, SourcePSI}, {s.MemoryEvents, SourceMemoryEvents}} {
		if src.on {
			out = append(out, src.src)
		}
	}
	return append(out, SourcePoll, SourceKick)
}
