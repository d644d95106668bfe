// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/pkg/thresholds"
)

// The margins evictd keeps above the kubelet's threshold for the same
// signal: the room evictd's defaults already keep over the kubelet's
// defaults (300Mi over 100Mi; 15% over 10%, ...), for an evicted pod to
// terminate before the kubelet kills without asking.
const (
	MemoryMargin  = 200 << 20 // bytes, on the memory signals
	PercentMargin = 0.05      // five points, on every other signal
	// MaxPlaced is the highest percentage placement writes: 100% reads as
	// no threshold at all (thresholds.SwitchedOff).
	MaxPlaced = 0.99
)

// Capacity gives a signal's capacity as observed at start; ok false when
// it is not known.
type Capacity func(thresholds.Signal) (capacity int64, ok bool)

// Placement is what became of one signal's hard threshold.
type Placement struct {
	Signal thresholds.Signal
	// Evictd is evictd's threshold before placement (its default, or what
	// the operator set); Kubelet the kubelet's ("" when it has none);
	// Placed what evictd uses.
	Evictd, Kubelet, Placed string
	// Moved: evictd's default was raised to Placed.
	Moved bool
	// Operator: the operator set Evictd (flag or file); it is never moved.
	Operator bool
	// KubeletFirst: the kubelet evicts before evictd's threshold comes
	// into play (a warning when Operator): evictd's threshold is below the
	// kubelet's, or at it on a signal where the kubelet evicts at once
	// (memory, PIDs; see kubeletFirst).
	KubeletFirst bool
	// Note says why a comparison could not be made (a capacity unknown).
	Note string
	// Capped: the kubelet's image collection bounded Placed, at the free
	// share its CappedBy (imageGCHighThresholdPercent) leaves (Place).
	Capped   bool
	CappedBy int32
}

// Place decides evictd's hard thresholds from its own (evictd: signal to
// value as written, "none" for off; operator: the signals the operator
// set) and the kubelet's: each default becomes the more cautious of itself
// and the kubelet's threshold plus the margin (MemoryMargin on the memory
// signals, PercentMargin on the others). A margin is added in the unit of
// evictd's value: a kubelet percentage against a memory quantity is first
// resolved with capacity, and a kubelet quantity against a percentage is
// turned into a share of capacity; without the capacity the default stays
// and Note says so. A value the operator set is kept; KubeletFirst says
// whether the kubelet acts first. allocatableMemory.available is left to
// follow memory.available, as evictd derives it, unless the operator named
// it. placed holds only the signals whose value changed.
//
// Then, unlike the margin, the image collection bounds the disk defaults:
// a default bytes threshold of a filesystem that holds the images
// (imagefs, and nodefs where imagesOn says so) is lowered, when above it,
// to where the kubelet first deletes images there (boundByImageGC), so
// that evictd's disk episode, taint included, never opens before the
// kubelet's image collection has had its turn (85 % used by default: 15 %
// available). On a one-disk node with the kubelet's
// defaults this is the kubelet's own imagefs.available<15%: its eviction
// manager deletes the unused images there before it evicts anyone, and
// evictd counts them as that reclaim (ExpectImageGC).
func Place(evictd map[string]string, operator map[string]bool, kubelet map[thresholds.Signal]thresholds.Value, capacity Capacity, gc ImageGC, imagesOn func(thresholds.Signal) bool) (out []Placement, placed map[string]string) {
	placed = map[string]string{}
	names := make([]string, 0, len(evictd))
	for k := range evictd {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		s, err := thresholds.ParseSignal(name)
		if err != nil || s.Stall() || s.MemoryHigh() {
			continue
		}
		if s == thresholds.AllocatableMemoryAvailable && !operator[name] {
			continue
		}
		p := Placement{Signal: s, Evictd: evictd[name], Placed: evictd[name], Operator: operator[name]}
		k, has := kubelet[s]
		if !has {
			boundByImageGC(&p, name, placed, gc, imagesOn, kubeletShare(kubelet, capacity, imagesOn, s))
			out = append(out, p)
			continue
		}
		p.Kubelet = k.String()
		own, err := thresholds.ParseValue(evictd[name])
		if err != nil {
			// "none" or a value switched off: evictd has no threshold
			// here, and the kubelet has.
			p.KubeletFirst = true
			out = append(out, p)
			continue
		}
		c, capOK := capacity(s)
		if !p.Operator {
			v, note := raise(s, own, k, c, capOK)
			p.Note = note
			if v != "" {
				p.Placed, p.Moved = v, true
				placed[name] = v
			}
		}
		if p.Operator {
			first, ok := kubeletFirst(s, own, k, c, capOK)
			p.KubeletFirst = first
			if !ok {
				p.Note = "capacity unknown: cannot compare a percentage with a quantity"
			}
		}
		boundByImageGC(&p, name, placed, gc, imagesOn, kubeletShare(kubelet, capacity, imagesOn, s))
		out = append(out, p)
	}
	return out, placed
}

// kubeletShare is the free share at which the kubelet's eviction manager
// deletes unused images for s's filesystem: the larger of its thresholds on
// s and, where the images are on nodefs (one disk), on the other disk space
// signal too; 0 when it has none (or a quantity without the capacity).
func kubeletShare(kubelet map[thresholds.Signal]thresholds.Value, capacity Capacity, imagesOn func(thresholds.Signal) bool, s thresholds.Signal) float64 {
	sigs := []thresholds.Signal{s}
	if imagesOn != nil && imagesOn(thresholds.NodeFsAvailable) {
		sigs = []thresholds.Signal{thresholds.NodeFsAvailable, thresholds.ImageFsAvailable}
	}
	share := 0.0
	for _, sig := range sigs {
		k, ok := kubelet[sig]
		if !ok {
			continue
		}
		if k.Quantity == nil {
			share = math.Max(share, k.Percentage)
			continue
		}
		if c, capOK := capacity(sig); capOK && c > 0 {
			share = math.Max(share, float64(thresholds.SaturatedValue(k.Quantity))/float64(c))
		}
	}
	return share
}

// boundByImageGC lowers p, a default percentage on a filesystem holding the
// images, to where the kubelet first collects images when above it (Place):
// the larger of the free share its periodic collection starts at and
// kubelet, the share at which its eviction manager deletes unused images
// before evicting (kubeletShare). An operator's
// value and a quantity are left as they are.
func boundByImageGC(p *Placement, name string, placed map[string]string, gc ImageGC, imagesOn func(thresholds.Signal) bool, kubelet float64) {
	if p.Operator || gc.Off() || (p.Signal != thresholds.ImageFsAvailable && p.Signal != thresholds.NodeFsAvailable) {
		return
	}
	if p.Signal == thresholds.NodeFsAvailable && (imagesOn == nil || !imagesOn(p.Signal)) {
		return
	}
	bound := math.Min(math.Max(gc.FreeShare(), kubelet), MaxPlaced)
	v, err := thresholds.ParseValue(p.Placed)
	if err != nil || v.Quantity != nil || v.Percentage <= bound+1e-9 {
		return
	}
	// Whole hundredths of a point, rounded down: never above the bound.
	p.Placed = strconv.FormatFloat(math.Floor(bound*10000+1e-6)/100, 'f', -1, 64) + "%"
	p.Capped = true
	p.Moved = p.Placed != p.Evictd
	if p.Moved {
		placed[name] = p.Placed
	} else {
		delete(placed, name)
	}
	p.CappedBy = gc.High
}

// raise returns the value own must become to sit the margin above the
// kubelet's k, or "" when own is already there (or cannot be compared).
func raise(s thresholds.Signal, own, k thresholds.Value, c int64, capOK bool) (string, string) {
	memory := s == thresholds.MemoryAvailable || s == thresholds.AllocatableMemoryAvailable
	if own.Quantity != nil {
		kq, ok := amount(k, c, capOK)
		if !ok {
			return "", "capacity unknown: the kubelet's percentage not resolved"
		}
		margin := int64(0)
		if memory {
			margin = MemoryMargin
		} else if capOK {
			margin = int64(math.Ceil(PercentMargin * float64(c)))
		} else {
			return "", "capacity unknown: five points not resolved"
		}
		want := kq + margin
		if thresholds.SaturatedValue(own.Quantity) >= want {
			return "", ""
		}
		return quantityString(want, memory), ""
	}
	// own is a percentage.
	var kp float64
	switch {
	case k.Quantity == nil:
		kp = k.Percentage
	case capOK && c > 0:
		kp = float64(thresholds.SaturatedValue(k.Quantity)) / float64(c)
	default:
		return "", "capacity unknown: the kubelet's quantity not resolved"
	}
	if memory {
		if !capOK || c <= 0 {
			return "", "capacity unknown: 200Mi not resolved"
		}
		kp += float64(MemoryMargin) / float64(c)
	} else {
		kp += PercentMargin
	}
	kp = math.Min(kp, MaxPlaced)
	if own.Percentage >= kp-1e-9 {
		return "", ""
	}
	// Whole hundredths of a point, rounded up: never under the target.
	return strconv.FormatFloat(math.Ceil(kp*10000-1e-6)/100, 'f', -1, 64) + "%", ""
}

// kubeletFirst compares evictd's threshold own on s with the kubelet's k:
// true when the kubelet evicts before own comes into play. Below the
// kubelet's, always. At it, only where the kubelet evicts as soon as its
// threshold is met (memory, PIDs): on a disk signal its eviction manager
// first deletes unused images and dead containers and evicts only if
// that falls short, which leaves evictd its turn at the same threshold;
// evictd's own disk defaults sit there (boundByImageGC), and an
// operator's value there, the kubelet's nodefs.available<10% say, is no
// mistake. ok false when the two cannot be compared (capacity unknown).
func kubeletFirst(s thresholds.Signal, own, k thresholds.Value, c int64, capOK bool) (first, ok bool) {
	var order int
	switch {
	case own.Quantity == nil && k.Quantity == nil:
		order = cmp.Compare(own.Percentage, k.Percentage)
	case own.Quantity != nil && k.Quantity != nil:
		order = own.Quantity.Cmp(*k.Quantity)
	default:
		a, ok1 := amount(own, c, capOK)
		b, ok2 := amount(k, c, capOK)
		if !ok1 || !ok2 {
			return false, false
		}
		order = cmp.Compare(a, b)
	}
	if s.Filesystem() != "" {
		return order < 0, true
	}
	return order <= 0, true
}

func amount(v thresholds.Value, c int64, capOK bool) (int64, bool) {
	if v.Quantity != nil {
		return thresholds.SaturatedValue(v.Quantity), true
	}
	if !capOK {
		return 0, false
	}
	return v.Amount(c), true
}

// quantityString writes n bytes in Mi, rounded up, for the memory
// signals, and as a plain count otherwise.
func quantityString(n int64, memory bool) string {
	if memory {
		mi := (n + 1<<20 - 1) >> 20
		return resource.NewQuantity(mi<<20, resource.BinarySI).String()
	}
	return strconv.FormatInt(n, 10)
}

// Summary is Place's result in one line per signal, for the start log:
// "memory.available<950Mi (kubelet 750Mi + 200Mi)".
func Summary(ps []Placement) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		s := string(p.Signal) + "<" + p.Placed
		switch {
		case p.Capped:
			k := p.Kubelet
			if k == "" {
				k = "none"
			}
			s += fmt.Sprintf(" (bounded by the kubelet's image collection: from %d%% used, and at its own threshold, kubelet %s; default %s)", p.CappedBy, k, p.Evictd)
		case p.Moved:
			s += fmt.Sprintf(" (placed: kubelet %s + margin; default %s)", p.Kubelet, p.Evictd)
		case p.Kubelet == "":
			s += " (kubelet: none)"
		case p.Operator && p.KubeletFirst:
			s += fmt.Sprintf(" (set by the operator, AT OR BELOW kubelet %s)", p.Kubelet)
		case p.Operator:
			s += fmt.Sprintf(" (set by the operator; kubelet %s)", p.Kubelet)
		default:
			s += fmt.Sprintf(" (kubelet %s)", p.Kubelet)
		}
		if p.Note != "" {
			s += " [" + p.Note + "]"
		}
		out = append(out, s)
	}
	return out
}
