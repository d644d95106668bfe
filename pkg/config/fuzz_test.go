// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzDecode: no input may panic the decoder or produce a multi-line error,
// and whatever decodes must survive a round trip through YAML unchanged.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion":"evictd.io/v1alpha1","kind":"EvictdConfiguration","evictionHard":{"pid.available":1000}}`))
	f.Add([]byte("apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\npriorityGroups:\n- name: a\n  namespaceSelector: {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		ths, err := c.Thresholds()
		if err != nil {
			t.Fatalf("decoded config has bad thresholds: %v", err)
		}
		if _, err := c.RankOptions(); err != nil {
			t.Fatalf("decoded config has bad rank options: %v", err)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("re-decoding %q: %v", out, err)
		}
		ths2, _ := again.Thresholds()
		if len(ths) != len(ths2) {
			t.Fatalf("round trip changed thresholds: %v vs %v", ths, ths2)
		}
		for i := range ths {
			if ths[i].String() != ths2[i].String() {
				t.Fatalf("round trip changed %s into %s", ths[i], ths2[i])
			}
		}
		if !reflect.DeepEqual(c.PriorityGroups, again.PriorityGroups) && !(len(c.PriorityGroups) == 0 && len(again.PriorityGroups) == 0) {
			t.Fatalf("round trip changed groups: %+v vs %+v", c.PriorityGroups, again.PriorityGroups)
		}
	})
}
