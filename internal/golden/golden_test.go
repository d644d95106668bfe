// SPDX-License-Identifier: Apache-2.0

package golden

import "testing"

func TestFirstDiff(t *testing.T) {
	for _, tc := range []struct{ got, want, diff string }{
		{"a\nb\n", "a\nb\n", "none"},
		{"a\nb\n", "a\nc\n", `line 2 is "b", the code makes it "c"`},
		{"a\n", "a\nb\n", `line 2 is "", the code makes it "b"`},
	} {
		if d := FirstDiff([]byte(tc.got), []byte(tc.want)); d != tc.diff {
			t.Errorf("FirstDiff(%q, %q) = %s, want %s", tc.got, tc.want, d, tc.diff)
		}
	}
}
