// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "1", "DIR": "/x y", "EMPTY": ""}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"--dir=$(DIR)/f", "--dir=/x y/f"},
		{"$(A)$(A)", "11"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"cost $5", "cost $5"},
		{"$(EMPTY)x", "x"},
		{"$(A", "$(A"},
		{"tail$", "tail$"},
	}
	for _, tt := range tests {
		if got := expand(tt.in, env); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestArgv(t *testing.T) {
	env := map[string]string{"WORKLOAD_DIR": "/d"}
	tests := []struct {
		name    string
		command []string
		args    []string
		want    []string
	}{
		{"no command runs the workload", nil, []string{"--hold-mib=1"}, []string{"/bin/workload", "--hold-mib=1"}},
		{"workload by name", []string{"workload", "--procs=2"}, []string{"--write-dir=$(WORKLOAD_DIR)"}, []string{"/bin/workload", "--procs=2", "--write-dir=/d"}},
		{"workload by path", []string{"/usr/bin/workload"}, nil, []string{"/bin/workload"}},
		{"other commands run as given", []string{"sleep"}, []string{"60"}, []string{"sleep", "60"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := argv(&corev1.Container{Command: tt.command, Args: tt.args}, "/bin/workload", env)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("argv = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestContainerEnv(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec:       corev1.PodSpec{NodeName: "n", ServiceAccountName: "sa"},
	}
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
	}
	c := &corev1.Container{
		VolumeMounts: []corev1.VolumeMount{{Name: "config"}, {Name: "data"}, {Name: "more"}},
		Env: []corev1.EnvVar{
			{Name: "A", Value: "a"},
			{Name: "B", Value: "$(A)-b"},
			{Name: "NODE", ValueFrom: field("spec.nodeName")},
			{Name: "POD_IP", ValueFrom: field("status.podIP")},
			{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
		},
	}
	got := containerEnv(pod, c, podFacts{hostIP: "127.0.0.1", podIP: "10.0.0.9", emptyDirs: map[string]string{"data": "/e/data", "more": "/e/more"}})
	want := map[string]string{
		"PATH":         got["PATH"],
		"HOSTNAME":     "p",
		WorkloadDirEnv: "/e/data", // the first mounted emptyDir; "config" is not one
		"A":            "a",
		"B":            "a-b",
		"NODE":         "n",
		"POD_IP":       "10.0.0.9",
	}
	if got["PATH"] == "" || !maps.Equal(got, want) {
		t.Fatalf("env = %v, want %v", got, want)
	}
	if l := envList(got); !slices.IsSorted(l) || len(l) != len(want) {
		t.Fatalf("envList = %v", l)
	}
}
