// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/test/vmnode/guestmem"
)

// Who ended a pod during a head-to-head run.
const (
	ByEvictd  = "evictd"  // an Eviction API call (DisruptionTarget EvictionByEvictionAPI)
	ByKubelet = "kubelet" // the kubelet's eviction manager (DisruptionTarget TerminationByKubelet, or Evicted)
	ByOOM     = "oom"     // the kernel's OOM killer (a container OOMKilled)
)

// PodFate is the first thing that ended a pod, and when it was seen.
type PodFate struct {
	Pod string
	By  string
	At  time.Time
}

// FateOf says who ended p, from its status alone; "" while nothing has.
func FateOf(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			switch c.Reason {
			case "EvictionByEvictionAPI":
				return ByEvictd
			case "TerminationByKubelet":
				return ByKubelet
			}
		}
	}
	if p.Status.Reason == "Evicted" {
		return ByKubelet
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" {
			return ByOOM
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
			return ByOOM
		}
	}
	return ""
}

// MemorySample is the node's memory.available as the kubelet computes it
// on cgroup v2 (guestmem), read in the guest at a host time.
type MemorySample struct {
	At        time.Time
	Available int64
}

// AvailableFromMeminfo computes memory.available from /proc/meminfo followed
// by the root cgroup's memory.stat (both files in one read).
func AvailableFromMeminfo(meminfoAndStat string) (int64, error) {
	return guestmem.Available([]byte(meminfoAndStat))
}

// FirstBelow is the time of the first sample under threshold, zero if none.
func FirstBelow(samples []MemorySample, threshold int64) time.Time {
	for _, s := range samples {
		if s.Available < threshold {
			return s.At
		}
	}
	return time.Time{}
}

// FillRate is how fast memory.available fell from hi to lo, in MiB/s: from
// the last sample at or above hi to the first below lo. It is the leak's
// real rate in the guest, which emulation may hold below the rate asked.
// 0 when the samples never crossed both.
func FillRate(samples []MemorySample, hi, lo int64) float64 {
	b := -1
	for i, s := range samples {
		if s.Available < lo {
			b = i
			break
		}
	}
	for a := b - 1; a >= 0; a-- {
		if samples[a].Available >= hi {
			dt := samples[b].At.Sub(samples[a].At).Seconds()
			if dt <= 0 {
				return 0
			}
			return float64(samples[a].Available-samples[b].Available) / (1 << 20) / dt
		}
	}
	return 0
}

// RaceRun is one leak at one fill rate, with or without evictd.
type RaceRun struct {
	Mode     string  // "evictd + kubelet" or "kubelet alone"
	Rate     float64 // the leak's asked fill rate, MiB/s
	Leaker   string  // the pod that leaks
	Fates    []PodFate
	Samples  []MemorySample
	OOMKills int64 // /proc/vmstat oom_kill over the run
	// Unresponsive is how long the guest had gone without answering when
	// the run was given up (a reclaim livelock); 0 when it answered. Its
	// OOM kills are then unknown.
	Unresponsive time.Duration
	Start        time.Time
	Thresholds   map[string]int64 // name -> memory.available threshold, bytes
	// Hold is what the leaker allocated before it began to grow, bytes;
	// Kills the kernel's kills during the run.
	Hold  int64
	Kills []Kill
	// Evicted is evictd's "evicted pod" line for the leaker, on the guest's
	// clock (zero without one): what the kills are placed against, never
	// when the host's watch saw the eviction.
	Evicted time.Time
}

// Stalled: the leak never took memory.available below evictd's threshold,
// and nothing ended it or killed anything. Such a run tests nothing: the
// pressure it exists for never came.
func (r RaceRun) Stalled() bool {
	low := r.MinAvailable()
	return len(r.Fates) == 0 && r.OOMKills == 0 && r.Unresponsive == 0 && low >= r.Thresholds["evictd"]
}

// Kill is one of the kernel's OOM kills: At on the host's clock (for the
// samples' time line), GuestAt on the guest's (evictd's log's), both from
// the kernel's uptime stamp.
type Kill struct {
	At, GuestAt time.Time
	Command     string
	AnonRSS     int64
}

// KillsAfterEviction says whether the run's OOM kills are the node's
// slowness rather than evictd's: each killed the leaker (the only process
// holding at least the leak's hold), at least allowance after evictd's
// eviction of it, both on the guest's clock (evictd's line and the
// kernel's stamp; the host's watch may see the eviction seconds late on a
// loaded host, which made a kill look early). evictd cannot make the kubelet and the runtime
// stop a pod sooner than they do (the actuator's containment is its answer
// to that; docs/actuator.md); what it owes is an eviction early enough for
// the time it assumes they take. The explanation, or why there is none.
func (r RaceRun) KillsAfterEviction(allowance time.Duration) (string, bool) {
	if r.OOMKills == 0 {
		return "no OOM kill", true
	}
	if len(r.Kills) == 0 {
		return fmt.Sprintf("the oom_kill counter rose by %d, and dmesg named no kill of the run", r.OOMKills), false
	}
	byEvictd := false
	for _, f := range r.Fates {
		byEvictd = byEvictd || f.Pod == r.Leaker && f.By == ByEvictd
	}
	if !byEvictd {
		return "evictd did not evict the leaker", false
	}
	if r.Evicted.IsZero() {
		return "evictd's log has no eviction of the leaker", false
	}
	var after []string
	for _, k := range r.Kills {
		if r.Hold <= 0 || k.AnonRSS < r.Hold {
			return fmt.Sprintf("the kernel killed %s holding %d MiB, not the leaker (which held %d MiB or more)", k.Command, k.AnonRSS>>20, r.Hold>>20), false
		}
		if k.GuestAt.IsZero() {
			return fmt.Sprintf("the kernel's kill of %s has no time on the guest's clock", k.Command), false
		}
		d := k.GuestAt.Sub(r.Evicted)
		if d < allowance {
			return fmt.Sprintf("the kernel killed the leaker %s after evictd's eviction of it (guest clock), within the %s an eviction is assumed to take", d.Round(10*time.Millisecond), allowance), false
		}
		after = append(after, d.Round(100*time.Millisecond).String())
	}
	return fmt.Sprintf("the kernel killed the leaker, evictd's victim, %s after its eviction (guest clock; more than the %s an eviction is assumed to take): the kubelet and the runtime had not stopped it by then",
		strings.Join(after, ", "), allowance), true
}

// Count is how many pods ended by who.
func (r RaceRun) Count(who string) int {
	n := 0
	for _, f := range r.Fates {
		if f.By == who {
			n++
		}
	}
	return n
}

// First is the earliest fate, if any.
func (r RaceRun) First() (PodFate, bool) {
	if len(r.Fates) == 0 {
		return PodFate{}, false
	}
	fs := append([]PodFate(nil), r.Fates...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].At.Before(fs[j].At) })
	return fs[0], true
}

// OrderKept: the first pod to go, if any went, is the leaker, the pod the
// kubelet's order puts first (furthest above its request).
func (r RaceRun) OrderKept() bool {
	f, ok := r.First()
	return !ok || f.Pod == r.Leaker
}

// MinAvailable is the lowest memory.available sampled.
func (r RaceRun) MinAvailable() int64 {
	low := int64(-1)
	for _, s := range r.Samples {
		if low < 0 || s.Available < low {
			low = s.Available
		}
	}
	return low
}

// RaceTable prints the runs side by side: who acted, how often, and how
// long after memory.available crossed each threshold.
func RaceTable(runs []RaceRun) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "mode\trate MiB/s (asked/seen)\tfirst\tevictd evictions\tkubelet evictions\tOOM kills\torder kept\tcrossing 300Mi → first\tcrossing 100Mi → first\tlowest available")
	for _, r := range runs {
		first, ok := r.First()
		who, since300, since100 := "none", "-", "-"
		if !ok && r.OOMKills > 0 {
			who = "the OOM killer, late"
		}
		ooms := strconv.FormatInt(r.OOMKills, 10)
		if r.Unresponsive > 0 {
			ooms = "unknown"
			if !ok {
				who = "none: node livelocked for " + r.Unresponsive.Round(time.Second).String() + "+"
			}
		}
		if ok {
			who = first.By + " (" + first.Pod + ")"
			since300 = sinceCrossing(r.Samples, r.Thresholds["evictd"], first.At)
			since100 = sinceCrossing(r.Samples, r.Thresholds["kubelet"], first.At)
		}
		seen := FillRate(r.Samples, r.Thresholds["evictd"]+(200<<20), r.Thresholds["evictd"])
		fmt.Fprintf(w, "%s\t%g/%.0f\t%s\t%d\t%d\t%s\t%v\t%s\t%s\t%.0f MiB\n", r.Mode, r.Rate, seen, who,
			r.Count(ByEvictd), r.Count(ByKubelet), ooms, r.OrderKept(), since300, since100, float64(r.MinAvailable())/(1<<20))
	}
	w.Flush()
	return b.String()
}

func sinceCrossing(samples []MemorySample, threshold int64, at time.Time) string {
	c := FirstBelow(samples, threshold)
	if c.IsZero() {
		return "not crossed"
	}
	return at.Sub(c).Round(10 * time.Millisecond).String()
}

// kubeletObservationRE matches the eviction manager's -v=3 line for one
// signal's observation, e.g.
// I1122 19:16:12.744486     210 helpers.go:978] "Eviction manager:" log="observations" signal="memory.available" resourceName="memory" available="1742396Ki" capacity="1967Mi" time="2026-11-22 19:16:05.1 +0000 UTC"
var kubeletObservationRE = regexp.MustCompile(`^I(\d{4} \d{2}:\d{2}:\d{2}\.\d+)\s.*log="observations" signal="memory\.available".* available="([^"]+)".* time="([^"]+)"`)

// KubeletObservations picks the eviction manager's memory.available
// observations logged between from and to out of a kubelet log, as lines
// "loop time  available  stats time".
func KubeletObservations(log string, from, to time.Time) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		m := kubeletObservationRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		// klog's header has no year: the run's own.
		at, err := time.ParseInLocation("2006 0102 15:04:05.000000", strconv.Itoa(from.UTC().Year())+" "+m[1], time.UTC)
		if err != nil || at.Before(from) || at.After(to) {
			continue
		}
		stats := m[3]
		// time.Time's String, with its monotonic reading (" m=+…") when it has one.
		wall, _, _ := strings.Cut(m[3], " m=")
		if st, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", wall); err == nil {
			stats = st.UTC().Format("15:04:05.000") + fmt.Sprintf(" (%s old)", at.Sub(st).Round(100*time.Millisecond))
		}
		out = append(out, fmt.Sprintf("%s  %s  %s", at.Format("15:04:05.000"), m[2], stats))
	}
	return out
}

// oomKillRE matches the kernel's line for each OOM kill, e.g.
// [ 1080.592534] Out of memory: Killed process 6984 (workload) total-vm:…
// (memory cgroup OOM kills say "Memory cgroup out of memory: Killed process").
var oomKillRE = regexp.MustCompile(`^\[\s*(\d+\.\d+)\] (?:Memory cgroup out of memory|Out of memory): Killed process (\d+) \(([^)]*)\)(?:.*anon-rss:(\d+)kB)?`)

// OOMKill is one kill the kernel logged: when (seconds of uptime), whom,
// and the anonymous memory it held (bytes; 0 when the line omits it).
type OOMKill struct {
	Uptime  float64
	PID     int
	Command string
	AnonRSS int64
}

// OOMKills lists the kills in dmesg's output, each once (the kernel may
// print a kill's line twice).
func OOMKills(dmesg string) []OOMKill {
	var out []OOMKill
	seen := map[int]bool{}
	for _, line := range strings.Split(dmesg, "\n") {
		m := oomKillRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		up, err1 := strconv.ParseFloat(m[1], 64)
		pid, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || seen[pid] {
			continue
		}
		seen[pid] = true
		var anon int64
		if m[4] != "" {
			kib, err := strconv.ParseInt(m[4], 10, 64)
			if err != nil {
				continue
			}
			anon = kib << 10
		}
		out = append(out, OOMKill{Uptime: up, PID: pid, Command: m[3], AnonRSS: anon})
	}
	return out
}
