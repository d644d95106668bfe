// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

func TestOptionsValidate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "workload")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	valid := func() Options {
		return Options{Client: &kubernetes.Clientset{}, Name: "node-a", MemoryBytes: 1 << 30, WorkloadBin: bin}
	}
	tests := []struct {
		name    string
		edit    func(*Options)
		wantErr string
	}{
		{name: "valid", edit: func(*Options) {}},
		{name: "no client", edit: func(o *Options) { o.Client = nil }, wantErr: "Client"},
		{name: "no name", edit: func(o *Options) { o.Name = "" }, wantErr: `node name ""`},
		{name: "upper case name", edit: func(o *Options) { o.Name = "Node" }, wantErr: `"Node"`},
		{name: "tiny memory", edit: func(o *Options) { o.MemoryBytes = 1 << 20 }, wantErr: "MemoryBytes=1048576"},
		{name: "reserved all memory", edit: func(o *Options) { o.ReservedMemoryBytes = 1 << 30 }, wantErr: "ReservedMemoryBytes=1073741824"},
		{name: "negative disk", edit: func(o *Options) { o.DiskBytes = -1 }, wantErr: "DiskBytes=-1"},
		{name: "inodes with a disk", edit: func(o *Options) { o.DiskBytes, o.DiskInodes = 1<<26, 20000 }},
		{name: "inodes without a disk", edit: func(o *Options) { o.DiskInodes = 20000 }, wantErr: "DiskInodes=20000"},
		{name: "negative inodes", edit: func(o *Options) { o.DiskBytes, o.DiskInodes = 1<<26, -1 }, wantErr: "DiskInodes=-1"},
		{name: "missing workload", edit: func(o *Options) { o.WorkloadBin = "/nonexistent/workload" }, wantErr: `"/nonexistent/workload"`},
		{name: "workload not executable", edit: func(o *Options) { o.WorkloadBin = notExec }, wantErr: "not an executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.edit(&o)
			err := o.defaultAndValidate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if o.CgroupFS != defaultCgroupFS || o.Pods != defaultPods || o.Clock == nil || o.Logger == nil {
					t.Fatalf("defaults not applied: %+v", o)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestVolumeRemovalRate(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    float64
		wantErr bool
	}{
		{"", 0, false}, // no annotation
		{"100", 100, false},
		{"2.5", 2.5, false},
		{"0", 0, true},
		{"-3", 0, true},
		{"fast", 0, true},
		{"NaN", 0, true},
		{"+Inf", 0, true},
	} {
		pod := &corev1.Pod{}
		if tt.value != "" {
			pod.Annotations = map[string]string{VolumeRemovalRateAnnotation: tt.value}
		}
		got, err := volumeRemovalRate(pod)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%q: %v, %v; want %v, error %v", tt.value, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(tt.value)) {
			t.Errorf("%q: the error %q does not name the value", tt.value, err)
		}
	}
}
