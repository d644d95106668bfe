// SPDX-License-Identifier: Apache-2.0

package config

import (
	"maps"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestOperatorHardAndPlaceHard(t *testing.T) {
	c := &Config{}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.BindFlags(fs, fs, fs)
	if err := fs.Parse([]string{"--eviction-hard=nodefs.available<12%"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.OperatorHard(), map[string]bool{"nodefs.available": true}; !maps.Equal(got, want) {
		t.Errorf("OperatorHard %v, want %v", got, want)
	}
	if err := c.PlaceHard(map[string]string{"memory.available": "950Mi"}); err != nil {
		t.Fatal(err)
	}
	if c.EvictionHard["memory.available"] != "950Mi" || c.EvictionHard["allocatableMemory.available"] != "950Mi" {
		t.Errorf("after placement: %v; want memory and allocatable at 950Mi", c.EvictionHard)
	}
	if got := c.OperatorHard(); len(got) != 1 {
		t.Errorf("placement made %v the operator's", got)
	}
	err := c.PlaceHard(map[string]string{"nodefs.available": "20%"})
	if err == nil || !strings.Contains(err.Error(), "nodefs.available was set by the operator") {
		t.Errorf("moving an operator's value: %v", err)
	}
	if err := c.PlaceHard(map[string]string{"pid.available": "0.5Ki%"}); err == nil || c.EvictionHard["pid.available"] != "10%" {
		t.Errorf("a bad placed value: %v, pid.available %q; want an error and the old value kept", err, c.EvictionHard["pid.available"])
	}
}

// TestOperatorHardFile: a value in the file is the operator's, even when it
// equals the default.
func TestOperatorHardFile(t *testing.T) {
	c, err := Decode([]byte("apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nevictionHard:\n  memory.available: 300Mi\n  allocatableMemory.available: 400Mi\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.OperatorHard(), map[string]bool{"memory.available": true, "allocatableMemory.available": true}; !maps.Equal(got, want) {
		t.Errorf("OperatorHard %v, want %v", got, want)
	}
}
