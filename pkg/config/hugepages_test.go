// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hugepageAwareEviction mirrors the kubelet's gate: on unless set false,
// in the file or by --hugepage-aware-eviction, the flag overriding the file
// only when given.
func TestHugepageAwareEviction(t *testing.T) {
	const head = "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\n"
	tests := []struct {
		name string
		file string // "" for no --config
		args []string
		want bool
	}{
		{name: "default", want: true},
		{name: "file without the field", file: head, want: true},
		{name: "file true", file: head + "hugepageAwareEviction: true\n", want: true},
		{name: "file false", file: head + "hugepageAwareEviction: false\n", want: false},
		{name: "flag false", args: []string{"--hugepage-aware-eviction=false"}, want: false},
		{name: "flag true", args: []string{"--hugepage-aware-eviction=true"}, want: true},
		{name: "flag false over file true", file: head + "hugepageAwareEviction: true\n", args: []string{"--hugepage-aware-eviction=false"}, want: false},
		{name: "flag true over file false", file: head + "hugepageAwareEviction: false\n", args: []string{"--hugepage-aware-eviction"}, want: true},
		{name: "unrelated flag keeps file false", file: head + "hugepageAwareEviction: false\n", args: []string{"--eviction-stall-window=20s"}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "c.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--config", path}, args...)
			}
			c, err := parseFlags(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.HugepageAware(); got != tc.want {
				t.Errorf("HugepageAware() = %v; want %v", got, tc.want)
			}
		})
	}
	if _, err := Decode([]byte(head + "hugepageAwareEviction: \"no\"\n")); err == nil || !strings.Contains(err.Error(), "hugepageAwareEviction") {
		t.Errorf("a string for hugepageAwareEviction: %v; want an error naming the field", err)
	}
	if _, err := parseFlags(t, "--hugepage-aware-eviction=maybe"); err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Errorf("--hugepage-aware-eviction=maybe: %v; want an error naming the value", err)
	}
}
