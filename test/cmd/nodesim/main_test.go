// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		name, memory, reserved, disk string
		extra                        int
		wantMem, wantDisk            int64
		wantErr                      string
	}{
		{name: "n", memory: "1Gi", reserved: "0", disk: "64Mi", wantMem: 1 << 30, wantDisk: 64 << 20},
		{name: "", memory: "1Gi", reserved: "0", disk: "0", wantErr: "--name"},
		{name: "n", memory: "lots", reserved: "0", disk: "0", wantErr: `--memory="lots"`},
		{name: "n", memory: "1Gi", reserved: "x", disk: "0", wantErr: `--reserved="x"`},
		{name: "n", memory: "1Gi", reserved: "0", disk: "0", extra: 1, wantErr: "unexpected"},
	}
	for _, tt := range tests {
		o, err := options(tt.name, tt.memory, tt.reserved, tt.disk, "/bin/workload", tt.extra)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: error %v, want %q", tt, err, tt.wantErr)
			}
			continue
		}
		if err != nil || o.MemoryBytes != tt.wantMem || o.DiskBytes != tt.wantDisk || o.WorkloadBin != "/bin/workload" {
			t.Errorf("%+v: got %+v, %v", tt, o, err)
		}
	}
}

func TestRunBadUsage(t *testing.T) {
	for _, args := range [][]string{{"--memory=1Gx", "--name=n"}, {"--no-such-flag"}, {"--name=n", "--kubeconfig=/nonexistent"}} {
		var stderr bytes.Buffer
		if code := run(args, &bytes.Buffer{}, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and a message", args, code, stderr.String())
		}
	}
}
