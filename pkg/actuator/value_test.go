// SPDX-License-Identifier: Apache-2.0

package actuator

import (
	"strings"
	"testing"
)

func TestCapAbove(t *testing.T) {
	for _, tc := range []struct{ usage, want uint64 }{
		{0, Margin},
		{1, Margin + pageSize},
		{100 << 20, 116 << 20},
		{100<<20 + 5, 116<<20 + pageSize},
	} {
		if got := CapAbove(tc.usage); got != tc.want {
			t.Errorf("CapAbove(%d) = %d, want %d", tc.usage, got, tc.want)
		}
	}
}

func TestParseLimitFiles(t *testing.T) {
	if n, err := ParseBytes([]byte("536870912\n")); err != nil || n != 512<<20 {
		t.Errorf("ParseBytes = %d, %v; want %d", n, err, 512<<20)
	}
	for _, v := range []string{"max\n", "536870912\n"} {
		if got, err := ParseLimit([]byte(v)); err != nil || got != strings.TrimSpace(v) {
			t.Errorf("ParseLimit(%q) = %q, %v", v, got, err)
		}
	}
	for _, bad := range []string{"", "max\n", "-1\n", "12k\n"} {
		_, err := ParseBytes([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(bad)) {
			t.Errorf("ParseBytes(%q) = %v; want an error naming the value", bad, err)
		}
	}
	for _, bad := range []string{"", "unlimited\n", "1.5\n"} {
		if _, err := ParseLimit([]byte(bad)); err == nil || !strings.Contains(err.Error(), strings.TrimSpace(bad)) {
			t.Errorf("ParseLimit(%q) = %v; want an error naming the value", bad, err)
		}
	}
}
