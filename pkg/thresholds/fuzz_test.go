// SPDX-License-Identifier: Apache-2.0

package thresholds

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary flag strings through the flag splitters and
// Parse. Nothing may panic; errors stay on one line; whatever parses must
// print back to an equivalent threshold.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"memory.available<500Mi,nodefs.available<10%",
		"memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%",
		"pid.available<none", "memory.available<0.5%", "nodefs.available<1e3", "memory.available<=1",
		"memory.available<NaN%", "memory.available<1Ei", "imagefs.inodesFree<99.999%", "a<b,a<c", "",
		"memory.pressureSome>40%", "allocatableMemory.pressureFull>0.001%", "memory.pressureFull<5%", "swap.available<10%",
		"memory.available<0.0%", "nodefs.available<10%%", "memory.available<1e-200", "memory.available<100.000001%", "pid.available<0e999",
	} {
		f.Add(s, "memory.available=1m30s")
	}
	f.Fuzz(func(t *testing.T, statements, pairs string) {
		hard, err := SplitStatements(statements)
		if err != nil {
			oneLine(t, err)
			return
		}
		grace, err := SplitPairs(pairs)
		if err != nil {
			oneLine(t, err)
			return
		}
		for _, spec := range []Spec{{Hard: hard}, {Soft: hard, GracePeriod: grace}, {Hard: hard, MinimumReclaim: grace}} {
			ths, err := Parse(spec)
			if err != nil {
				oneLine(t, err)
				continue
			}
			for _, th := range ths {
				if !th.Signal.Valid() {
					t.Fatalf("invalid signal %q accepted", th.Signal)
				}
				v, err := ParseValue(th.Value.String())
				if err != nil {
					t.Fatalf("%s prints as %q, which does not parse: %v", th, th.Value.String(), err)
				}
				if th.Signal.Stall() {
					// Printed as the share stalled, held as its complement.
					v = StallValue(v.Percentage)
				}
				for _, capacity := range []int64{0, 1, 1000, 1 << 40} {
					a, b := th.Value.Amount(capacity), v.Amount(capacity)
					if a <= 0 && capacity > 0 && th.Value.Quantity != nil {
						t.Fatalf("%s: amount %d is not positive", th, a)
					}
					if a != b {
						t.Fatalf("%s: amount %d, but %d after printing and parsing", th, a, b)
					}
				}
			}
		}
	})
}

func oneLine(t *testing.T, err error) {
	t.Helper()
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Fatalf("error spans lines: %q", err)
	}
}
