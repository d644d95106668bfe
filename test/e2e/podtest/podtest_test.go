// SPDX-License-Identifier: Apache-2.0

package podtest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name  string
		opts  []Option
		check func(*corev1.Pod) string
	}{
		{"defaults", nil, func(p *corev1.Pod) string {
			c := p.Spec.Containers
			if p.Name != "p" || p.Namespace != "ns" || len(c) != 1 || c[0].Name != "main" || c[0].Image != "evictd.test/none:latest" ||
				p.Spec.TerminationGracePeriodSeconds != nil || p.Spec.RestartPolicy != "" || len(p.Spec.Volumes) != 0 {
				return "defaults wrong"
			}
			return ""
		}},
		{"scheduling", []Option{OnNode("n1"), Priority("high"), Labels(map[string]string{"app": "x"}), Grace(7), NeverRestart()}, func(p *corev1.Pod) string {
			if p.Spec.NodeName != "n1" || p.Spec.PriorityClassName != "high" || p.Labels["app"] != "x" ||
				*p.Spec.TerminationGracePeriodSeconds != 7 || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
				return "scheduling fields wrong"
			}
			return ""
		}},
		{"workload", []Option{Run("img", "workload", "--hold-mib=4"), Container("c", "other")}, func(p *corev1.Pod) string {
			c := p.Spec.Containers[0]
			if c.Name != "c" || c.Image != "other" || len(c.Command) != 1 || c.Command[0] != "workload" || len(c.Args) != 1 || c.Args[0] != "--hold-mib=4" {
				return "container wrong"
			}
			return ""
		}},
		{"guaranteed", []Option{Resources(List("cpu", "100m", "memory", "64Mi"), List("cpu", "100m", "memory", "64Mi"))}, func(p *corev1.Pod) string {
			r := p.Spec.Containers[0].Resources
			if r.Requests.Memory().Value() != 64<<20 || r.Limits.Cpu().MilliValue() != 100 {
				return "resources wrong"
			}
			return ""
		}},
		{"scratch", []Option{Scratch()}, func(p *corev1.Pod) string {
			if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].EmptyDir == nil ||
				len(p.Spec.Containers[0].VolumeMounts) != 1 || p.Spec.Containers[0].VolumeMounts[0].MountPath != "/scratch" {
				return "no emptyDir at /scratch"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New("ns", "p", tt.opts...)
			if msg := tt.check(p); msg != "" {
				t.Errorf("%s: %+v", msg, p)
			}
		})
	}
}

func TestList(t *testing.T) {
	tests := []struct {
		pairs []string
		want  map[corev1.ResourceName]string
	}{
		{nil, map[corev1.ResourceName]string{}},
		{[]string{"memory", "32Mi"}, map[corev1.ResourceName]string{"memory": "32Mi"}},
		{[]string{"cpu", "", "memory", "0"}, map[corev1.ResourceName]string{"memory": "0"}},
		{[]string{"cpu", "1", "ephemeral-storage", "10Mi"}, map[corev1.ResourceName]string{"cpu": "1", "ephemeral-storage": "10Mi"}},
	}
	for _, tt := range tests {
		got := List(tt.pairs...)
		if len(got) != len(tt.want) {
			t.Errorf("List(%q) = %v, want %v", tt.pairs, got, tt.want)
			continue
		}
		for k, v := range tt.want {
			if q, ok := got[k]; !ok || q.String() != v {
				t.Errorf("List(%q)[%s] = %v, want %s", tt.pairs, k, got[k], v)
			}
		}
	}
}

func TestCreateReadyAndWait(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	p, err := CreateReady(ctx, client, New("ns", "p", OnNode("n1")))
	if err != nil {
		t.Fatal(err)
	}
	if !RunningAndReady(p) {
		t.Fatalf("CreateReady returned status %+v", p.Status)
	}
	if got := WaitPod(t, client, "ns", "p", 5*time.Second, "Running and Ready", RunningAndReady); got.Name != "p" {
		t.Errorf("WaitPod returned %s", got.Name)
	}
	if _, err := CreateReady(ctx, client, New("ns", "p")); err == nil {
		t.Error("creating the pod twice did not fail")
	}

	pdb := PDB("ns", "b", 1, map[string]string{"app": "x"})
	if pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app"] != "x" {
		t.Fatalf("PDB spec %+v", pdb.Spec)
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := WaitPDB(ctx, client, "ns", "b", 5*time.Second, Settled); err != nil {
		t.Errorf("a PDB of generation 0 should count as settled: %v", err)
	}
	last, err := WaitPDB(ctx, client, "ns", "b", 300*time.Millisecond, func(p *policyv1.PodDisruptionBudget) bool { return p.Status.DisruptionsAllowed == 1 })
	if err == nil || last == nil || last.Name != "b" {
		t.Errorf("WaitPDB on a condition never met: %v, last %v", err, last)
	}
}
