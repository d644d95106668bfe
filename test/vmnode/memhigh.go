// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// kubeletMemoryHigh is the memory.high the kubelet writes on a container's
// cgroup under MemoryQoS with a memoryThrottlingFactor (its
// generateLinuxContainerResources, Kubernetes 1.37): request plus factor
// times the room between request and limit, rounded down to a page; none
// (0) when the container has no limit here (the kubelet would use the
// node's allocatable memory), when request equals limit (Guaranteed), or
// when the result is not above the request.
func kubeletMemoryHigh(request, limit int64, factor float64, pageSize int64) int64 {
	if limit == 0 || (request == limit && request != 0) {
		return 0
	}
	high := int64(math.Floor((float64(request)+float64(limit-request)*factor)/float64(pageSize))) * pageSize
	if high <= request {
		return 0
	}
	return high
}

// withMemoryThrottlingFactor is a KubeletConfiguration (JSON, as
// kubeletConfig writes it) with memoryThrottlingFactor set: with the
// MemoryQoS gate (beta, on by default in 1.37) the kubelet then writes
// memory.high on containers; without the factor (its default, nil) it
// writes none.
func withMemoryThrottlingFactor(kubeletJSON []byte, factor float64) ([]byte, error) {
	if !(factor > 0 && factor <= 1) {
		return nil, fmt.Errorf("memoryThrottlingFactor %g: the kubelet accepts (0, 1]", factor)
	}
	var cfg map[string]any
	if err := json.Unmarshal(kubeletJSON, &cfg); err != nil {
		return nil, fmt.Errorf("the kubelet's config: %w", err)
	}
	if cfg["kind"] != "KubeletConfiguration" {
		return nil, fmt.Errorf("the kubelet's config: kind %v, want KubeletConfiguration", cfg["kind"])
	}
	cfg["memoryThrottlingFactor"] = factor
	return json.MarshalIndent(cfg, "", "  ")
}

// cgroupRead is one reading, in the guest, of a container cgroup's memory
// files, at the guest's uptime.
type cgroupRead struct {
	Uptime float64
	// Events are memory.events' counters (low, high, max, oom, oom_kill).
	Events map[string]int64
	// SomeTotal is memory.pressure's some total= (µs).
	SomeTotal int64
	// Current, Peak and High are memory.current, memory.peak and
	// memory.high (High -1 for "max").
	Current, Peak, High int64
}

// parseCgroupRead parses cgroupReadScript's output (node_10_memhigh_test.go).
func parseCgroupRead(out string) (cgroupRead, error) {
	r := cgroupRead{Events: map[string]int64{}, Peak: -1}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	up := strings.Fields(lines[0])
	if len(up) != 2 {
		return r, fmt.Errorf("/proc/uptime: %q", lines[0])
	}
	var err error
	if r.Uptime, err = strconv.ParseFloat(up[0], 64); err != nil {
		return r, fmt.Errorf("/proc/uptime: %q: %w", lines[0], err)
	}
	seen := map[string]bool{}
	var file string
	for _, line := range lines[1:] {
		if f, ok := strings.CutPrefix(line, "== "); ok {
			file = f
			seen[f] = true
			continue
		}
		bad := func(err error) (cgroupRead, error) { return r, fmt.Errorf("%s: line %q: %w", file, line, err) }
		f := strings.Fields(line)
		switch file {
		case "memory.events":
			if len(f) != 2 {
				return bad(fmt.Errorf("want a key and a count"))
			}
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return bad(err)
			}
			r.Events[f[0]] = v
		case "memory.pressure":
			if len(f) != 5 || f[0] != "some" && f[0] != "full" {
				return bad(fmt.Errorf("want some/full and four fields"))
			}
			if f[0] != "some" {
				continue
			}
			t, ok := strings.CutPrefix(f[4], "total=")
			if !ok {
				return bad(fmt.Errorf("no total="))
			}
			if r.SomeTotal, err = strconv.ParseInt(t, 10, 64); err != nil {
				return bad(err)
			}
		case "memory.current", "memory.peak", "memory.high":
			v := int64(-1)
			if line != "max" {
				if v, err = strconv.ParseInt(line, 10, 64); err != nil {
					return bad(err)
				}
			}
			switch file {
			case "memory.current":
				r.Current = v
			case "memory.peak":
				r.Peak = v
			default:
				r.High = v
			}
		default:
			return bad(fmt.Errorf("not a file the script reads"))
		}
	}
	for _, f := range []string{"memory.events", "memory.pressure", "memory.current", "memory.high"} {
		if !seen[f] {
			return r, fmt.Errorf("no %s in %q", f, out)
		}
	}
	if _, ok := r.Events["high"]; !ok {
		return r, fmt.Errorf("memory.events has no high in %q", out)
	}
	return r, nil
}

// memHighRates are a container's memory.events high rate (a second) and
// memory.pressure some share (percent) between two readings.
func memHighRates(a, b cgroupRead) (highPerSec, somePercent float64) {
	d := b.Uptime - a.Uptime
	if d <= 0 {
		return 0, 0
	}
	return float64(b.Events["high"]-a.Events["high"]) / d, float64(b.SomeTotal-a.SomeTotal) / 1e4 / d
}

// memHighSeries are the series of evictd_memory_high_containers that
// metrics (Prometheus text) holds with a non-zero value, as
// "container/signal/state".
func memHighSeries(metrics string) []string {
	var out []string
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, "evictd_memory_high_containers{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || value == "0" {
			continue
		}
		l := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(v, `"`)
		}
		out = append(out, l["container"]+"/"+l["signal"]+"/"+l["state"])
	}
	return out
}

// WakeupFigures reads evictd's wake-up series from a /metrics page: each
// source's evictd_wakeup_source_active and evictd_wakeups_total.
func WakeupFigures(metrics string) (active, woke map[string]float64) {
	active, woke = map[string]float64{}, map[string]float64{}
	for _, line := range strings.Split(metrics, "\n") {
		var into map[string]float64
		rest, ok := strings.CutPrefix(line, "evictd_wakeup_source_active{")
		if ok {
			into = active
		} else if rest, ok = strings.CutPrefix(line, "evictd_wakeups_total{"); ok {
			into = woke
		} else {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(labels, ",") {
			if k, src, _ := strings.Cut(kv, "="); k == "source" {
				into[strings.Trim(src, `"`)] = v
			}
		}
	}
	return active, woke
}

// specMemoryHigh is the memory.high a container's OCI spec asks for, from
// `ctr containers info --spec`: the kubelet's CRI request puts it in
// linux.resources.unified, which containerd keeps as the kubelet gave it
// (runc writes it into the cgroup before the container starts). It is the
// kubelet's own figure: evictd's actuator writes the cgroup's file, never
// the spec. 0 when the spec asks for none.
func specMemoryHigh(spec []byte) (int64, error) {
	var s struct {
		Linux *struct {
			Resources *struct {
				Unified map[string]string `json:"unified"`
			} `json:"resources"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(spec, &s); err != nil {
		return 0, fmt.Errorf("the container's OCI spec: %w", err)
	}
	if s.Linux == nil || s.Linux.Resources == nil {
		return 0, nil
	}
	v, ok := s.Linux.Resources.Unified["memory.high"]
	if !ok {
		return 0, nil
	}
	if v == "max" {
		return -1, nil
	}
	high, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the container's OCI spec: linux.resources.unified memory.high %q: %w", v, err)
	}
	return high, nil
}

// memHighHeld is how long evictd had a container stuck at memory.high, from
// its eviction's reason ("container churn: memory.events high 352.9/s over
// 30s (threshold 10/s), for 20s, priority 0"): its own figure, rounded to
// the second.
func memHighHeld(reason string) (time.Duration, error) {
	_, rest, ok := strings.Cut(reason, ", for ")
	if !ok {
		return 0, fmt.Errorf("no \", for\" in %q", reason)
	}
	d, _, _ := strings.Cut(rest, ",")
	held, err := time.ParseDuration(strings.TrimSpace(d))
	if err != nil {
		return 0, fmt.Errorf("%q: %w", reason, err)
	}
	return held, nil
}
