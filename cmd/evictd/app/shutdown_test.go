// SPDX-License-Identifier: Apache-2.0

package app

import (
	"slices"
	"testing"

	"go.uber.org/zap"
)

// TestStopOrder: the way out runs the loop's stop first, then lifts the
// brake, releases the lease, stops the informers and serving last, each
// part once and after the one before it returned.
func TestStopOrder(t *testing.T) {
	var got []string
	part := func(name string) func() { return func() { got = append(got, name) } }
	stopOrder(stopParts{loop: part("loop"), brake: part("brake"), lease: part("lease"), informers: part("informers"),
		serving: part("serving")}).run(zap.NewNop())
	if want := []string{"loop", "brake", "lease", "informers", "serving"}; !slices.Equal(got, want) {
		t.Errorf("the way out stopped %v, want %v", got, want)
	}
}
