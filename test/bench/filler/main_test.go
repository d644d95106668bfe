// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args    []string
		want    config
		wantErr string
	}{
		{[]string{"--step-mib=300"}, config{stepMiB: 300}, ""},
		{[]string{"--grow-mib-per-sec=1000", "--grow-to-mib=1024"}, config{growRate: 1000, growTo: 1024}, ""},
		{nil, config{}, "nothing to do"},
		{[]string{"--step-mib=-1"}, config{}, "--step-mib=-1"},
		{[]string{"--grow-mib-per-sec=100"}, config{}, "--grow-to-mib=0"},
		{[]string{"--grow-to-mib=10"}, config{}, "needs --grow-mib-per-sec"},
		{[]string{"--step-mib=1", "extra"}, config{}, `unexpected argument "extra"`},
		{[]string{"--step-mib=x"}, config{}, "invalid value"},
		{[]string{"--step-mib=1", "--cache-file=/c", "--cache-mib=64"}, config{stepMiB: 1, cacheFile: "/c", cacheMiB: 64}, ""},
		{[]string{"--step-mib=1", "--cache-mib=64"}, config{}, `--cache-file=""`},
		{[]string{"--step-mib=1", "--cache-file=/c"}, config{}, "give both or neither"},
		{[]string{"--step-mib=1", "--cache-file=/c", "--cache-mib=-2"}, config{}, "--cache-mib=-2"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parse = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestWriteCache(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cache")
	if err := writeCache(p, 3); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Size() != 3<<20 {
		t.Fatalf("stat = %v, %v; want a file of %d bytes", st, err, 3<<20)
	}
	if err := writeCache(filepath.Join(p, "under-a-file"), 1); err == nil {
		t.Fatal("writeCache under a regular file: no error")
	}
}
