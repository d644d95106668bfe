// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Decode errors name the field as the file spells it, indices included,
// and the value given, in words rather than Go types.
func TestDecodeErrorsNameTheFieldAndValue(t *testing.T) {
	const head = "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\n"
	tests := []struct {
		name, body, want string
	}{
		{"offset beyond int32", "priorityGroups:\n- name: a\n  namespaces: [x]\n  offset: 99999999999\n", "priorityGroups[0].offset: 99999999999 is outside the int32 range"},
		{"offset not whole", "priorityGroups:\n- name: a\n  namespaces: [x]\n- name: b\n  namespaces: [z]\n  offset: 1.5\n", "priorityGroups[1].offset: 1.5 must be a whole number"},
		{"YAML boolean as a namespace", "priorityGroups:\n- name: a\n  namespaces: [x, n]\n", "priorityGroups[0].namespaces[1]: false must be a string"},
		{"list for a boolean", "priorityGroups:\n- name: a\n  namespaces: [x]\n  fence: [1]\n", "priorityGroups[0].fence: must be true or false, not a list"},
		{"list for a map", "evictionHard: [memory.available]\n", "evictionHard: must be a map, not a list"},
		{"object for a list", "excludedNamespaces: {a: b}\n", "excludedNamespaces: must be a list, not an object"},
		{"number for a string", "excludedNamespaces: [kube-system, 3]\n", "excludedNamespaces[1]: 3 must be a string"},
		{"grace cap beyond int32", "evictionMaxPodGracePeriod: 3000000000\n", "evictionMaxPodGracePeriod: 3000000000 is outside the int32 range"},
		{"bad duration", "evictionPressureTransitionPeriod: 5x\n", `evictionPressureTransitionPeriod: time: unknown unit "x" in duration "5x"`},
		{"number for a duration", "memoryHighEviction: true\nmemoryHighWindow: 30\n", `memoryHighWindow: 30 must be a duration such as "30s"`},
		{"list for a duration", "evictionStallWindow: [10s]\n", `evictionStallWindow: must be a duration such as "30s", not a list`},
		{"unknown field", "priorityGroups:\n- name: a\n  namespaces: [x]\n  fenced: true\n", `unknown field "priorityGroups[0].fenced"`},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(head+tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			want := "config " + path + ": " + tc.want
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Load error = %v, want it to start %q", err, want)
			}
			for _, goism := range []string{"Go struct", "json:", "int32 range\n", "PriorityGroup."} {
				if strings.Contains(err.Error(), goism) {
					t.Errorf("error %q speaks Go (%q)", err, goism)
				}
			}
		})
	}
}

func TestValueAt(t *testing.T) {
	js := []byte(`{"a":[1,{"b":"x","c":[true,null]}],"d":{}}`)
	for _, tc := range []struct {
		offset      int64
		path, value string
	}{
		// The decoder's offset is just past the value it gave up on.
		{6, "a", "a list"},
		{7, "a[0]", "1"},
		{16, "a[1].b", `"x"`},
		{26, "a[1].c[0]", "true"},
		{31, "a[1].c[1]", "null"},
		{int64(len(js)) - 2, "d", "an object"},
		{int64(len(js)) + 5, "", ""},
	} {
		if path, value := valueAt(js, tc.offset); path != tc.path || value != tc.value {
			t.Errorf("valueAt(%d) = %q, %q; want %q, %q", tc.offset, path, value, tc.path, tc.value)
		}
	}
}
