// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"sort"
	"strconv"

	"github.com/evictd/evictd/pkg/thresholds"
)

// MaxKubeletShare is the largest share of a signal's capacity that
// placement adopts as a kubelet hard threshold. The kubelet's defaults
// keep 100Mi of memory and 5 to 15 % of a disk; managed offerings keep up
// to about 1Gi and 15 %. A hard threshold over half the capacity would
// have the kubelet evict while half the node is free, all the time: no
// node runs so, and a reading that says so is a forgery or a mistake, which
// must not move evictd's thresholds (a margin above it would evict every
// pod on a healthy node).
const MaxKubeletShare = 0.5

// Refusal is a kubelet hard threshold placement does not adopt.
type Refusal struct {
	Signal thresholds.Signal
	// Value is the kubelet's threshold, Bound the share it exceeds, as
	// "50% of 7.8Gi"; Kept what placement takes instead (the kubelet's
	// default, "none" where it has none).
	Value, Bound, Kept string
}

// BoundKubelet returns hard without the thresholds beyond MaxKubeletShare
// of their signal's capacity: each is replaced by the kubelet's default
// for its signal (DefaultHard; allocatableMemory.available takes
// memory.available's, which the kubelet copies), or dropped where the
// kubelet has none. A percentage is bounded as it is; a quantity when its
// capacity is known. hard itself is not changed.
func BoundKubelet(hard map[thresholds.Signal]thresholds.Value, capacity Capacity) (map[thresholds.Signal]thresholds.Value, []Refusal) {
	out := make(map[thresholds.Signal]thresholds.Value, len(hard))
	var refused []Refusal
	defaults := DefaultHard()
	defaults[string(thresholds.AllocatableMemoryAvailable)] = defaults[string(thresholds.MemoryAvailable)]
	for s, v := range hard {
		c, capOK := capacity(s)
		var over bool
		var bound string
		switch {
		case v.Quantity == nil:
			over, bound = v.Percentage > MaxKubeletShare+1e-9, share()
		case capOK && c > 0:
			over = float64(thresholds.SaturatedValue(v.Quantity)) > MaxKubeletShare*float64(c)
			bound = share() + " of " + capacityString(s, c)
		}
		if !over {
			out[s] = v
			continue
		}
		r := Refusal{Signal: s, Value: v.String(), Bound: bound, Kept: "none"}
		if d, ok := defaults[string(s)]; ok {
			if dv, err := thresholds.ParseValue(d); err == nil {
				out[s] = dv
				r.Kept = d
			}
		}
		refused = append(refused, r)
	}
	sort.Slice(refused, func(i, j int) bool { return refused[i].Signal < refused[j].Signal })
	return out, refused
}

func share() string {
	return strconv.FormatFloat(MaxKubeletShare*100, 'f', -1, 64) + "%"
}

// capacityString writes a capacity as the log reads it: Mi for memory, a
// count for the others.
func capacityString(s thresholds.Signal, c int64) string {
	if s == thresholds.MemoryAvailable || s == thresholds.AllocatableMemoryAvailable {
		return quantityString(c, true)
	}
	return strconv.FormatInt(c, 10)
}
