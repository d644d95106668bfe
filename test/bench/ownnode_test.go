// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"testing"
	"time"
)

func TestOwnNodeFigure(t *testing.T) {
	var f OwnNodeFigure
	if f.Ratio() != 0 || f.Off() != 0 || PerParam(f, 10) != 0 {
		t.Errorf("empty figure: ratio %v off %v per param %v; want zeros", f.Ratio(), f.Off(), PerParam(f, 10))
	}
	// Three rounds; the ratio is each round against its own baseline, so a
	// round on a busier machine (the second) moves it less than the
	// medians of each state would.
	f.Add(0.010, 0.030)
	f.Add(0.020, 0.050)
	f.Add(0.011, 0.032)
	if got, want := f.Off(), 0.011; got != want {
		t.Errorf("Off = %v; want %v", got, want)
	}
	if got, want := f.On(), 0.032; got != want {
		t.Errorf("On = %v; want %v", got, want)
	}
	if got, want := f.Ratio(), 0.032/0.011; got != want {
		t.Errorf("Ratio = %v; want %v (the middle of 3.0, 2.5 and 2.909)", got, want)
	}
	if got, want := f.Added(), 0.021; got < want-1e-12 || got > want+1e-12 {
		t.Errorf("Added = %v; want %v", got, want)
	}
	if got, want := PerParam(f, 1000), 21*time.Microsecond; got != want {
		t.Errorf("PerParam over 1000 pods = %v; want %v", got, want)
	}
	if got, want := ProjectAdded(21*time.Microsecond, 3300), 69300*time.Microsecond; got != want {
		t.Errorf("ProjectAdded = %v; want %v", got, want)
	}
	// An even count takes the mean of the middle two; a round without a
	// baseline has no ratio.
	var g OwnNodeFigure
	g.Add(0, 5)
	g.Add(2, 4)
	g.Add(4, 4)
	if got, want := g.Ratio(), 1.5; got != want {
		t.Errorf("Ratio with a zero baseline = %v; want %v (of 2 and 1, the zero round left out)", got, want)
	}
	if got := Micros(1500 * time.Nanosecond); got != "1.5µs" {
		t.Errorf("Micros = %q", got)
	}
}
