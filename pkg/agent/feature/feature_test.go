// SPDX-License-Identifier: Apache-2.0

package feature

import (
	"context"
	"reflect"
	"testing"
)

// named records the points it is called at.
type named struct {
	Nop
	name string
	log  *[]string
}

func (n named) Episodes(Episodes) { *n.log = append(*n.log, n.name+" episodes") }

func (n named) BeforeCall(_ context.Context, resource string) {
	*n.log = append(*n.log, n.name+" before "+resource)
}

// TestSetCallsEachInOrder: a Set calls every feature at each point, in
// the order they were registered; a point a feature does not implement
// (Nop's) is passed over.
func TestSetCallsEachInOrder(t *testing.T) {
	var log []string
	s := Set{named{name: "a", log: &log}, named{name: "b", log: &log}}
	s.Assessed(Assessment{})
	s.Episodes(Episodes{})
	s.BeforeCall(context.Background(), "memory")
	s.Answered(Answer{})
	want := []string{"a episodes", "b episodes", "a before memory", "b before memory"}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("calls %q, want %q", log, want)
	}
}
