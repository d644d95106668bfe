// SPDX-License-Identifier: Apache-2.0

package install

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestParse(t *testing.T) {
	for _, s := range []string{"", "evictd", "/evictd", "ns/", "a/b/c", "Evictd-System/evictd", "ns/Evictd", "a.b/evictd", strings.Repeat("n", 64) + "/evictd"} {
		if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("Parse(%q): %v; want an error naming the value", s, err)
		}
	}
	for _, s := range []string{"evictd-system/evictd", "platform/second-evictd", "ns/a.b-c"} {
		if got, err := Parse(s); err != nil || got != s {
			t.Errorf("Parse(%q) = %q, %v", s, got, err)
		}
	}
}

func TestDefault(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	if got := Default(); got != "evictd-system/evictd" {
		t.Errorf("Default outside a pod = %q", got)
	}
	t.Setenv("POD_NAMESPACE", "platform")
	if got := Default(); got != "platform/evictd" {
		t.Errorf("Default in a pod of platform = %q", got)
	}
}

// TestMark: short IDs read as themselves; long ones are cut to a valid
// label value that still tells two IDs with a common start apart, and is
// the same every time.
func TestMark(t *testing.T) {
	if got := Mark("evictd-system/evictd"); got != "evictd-system.evictd" {
		t.Errorf("Mark = %q", got)
	}
	long1 := "ns/" + strings.Repeat("a", 100) + "1"
	long2 := "ns/" + strings.Repeat("a", 100) + "2"
	m1, m2 := Mark(long1), Mark(long2)
	for _, m := range []string{m1, m2, Mark("n/" + strings.Repeat("a.", 40) + "b")} {
		if errs := validation.IsValidLabelValue(m); len(errs) > 0 || len(m) != 63 {
			t.Errorf("Mark %q (%d): %v; want a label value of 63", m, len(m), errs)
		}
	}
	if m1 == m2 || m1 != Mark(long1) {
		t.Errorf("Mark(%q) = %q, Mark(%q) = %q: want two different marks, each deterministic", long1, m1, long2, m2)
	}
	if Mark("") != "" {
		t.Error("Mark(\"\") is not empty")
	}
}

func TestInstance(t *testing.T) {
	if got := Instance("evictd-system/evictd", "node-1"); got != "evictd-system/evictd@node-1" {
		t.Errorf("Instance = %q", got)
	}
	id := "ns/" + strings.Repeat("d", 200)
	a, b := Instance(id, strings.Repeat("n", 200)+"a"), Instance(id, strings.Repeat("n", 200)+"b")
	if len(a) > 128 || len(b) > 128 || a == b || !strings.HasPrefix(a, Mark(id)+"@") {
		t.Errorf("long Instances %q, %q: want at most 128 characters each, different, starting with the mark", a, b)
	}
}

func TestConditionMessage(t *testing.T) {
	msg := ConditionMessage("memory pressure (threshold memory.available<100Mi)", "evictd-system/evictd")
	if msg != "memory pressure (threshold memory.available<100Mi) (evictd install evictd-system/evictd)" {
		t.Errorf("ConditionMessage = %q", msg)
	}
	for in, want := range map[string]string{
		msg: "evictd-system/evictd",
		"memory pressure (threshold memory.available<100Mi)": "",
		"x (evictd install not an id)":                       "",
		"":                                                   "",
	} {
		if got := OfConditionMessage(in); got != want {
			t.Errorf("OfConditionMessage(%q) = %q; want %q", in, got, want)
		}
	}
}
