// SPDX-License-Identifier: Apache-2.0

package rank

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// randomNode builds n random pods with random stats: a mix of every rule's
// inputs (priorities up to and past critical, requests, sidecars, missing
// stats, static/DaemonSet/opted-out/finished pods, grouped namespaces).
func randomNode(r *rand.Rand, n int) ([]*v1.Pod, *statsapi.Summary) {
	namespaces := []string{"default", "batch", "tenant-a", "tenant-b", "infra", "kube-system"}
	prios := []int32{-100, 0, 0, 10, 1000, 1_000_000_000, 2_000_000_000, 2_000_001_000}
	sizes := []string{"", "1Mi", "64Mi", "128Mi", "1Gi"}
	pods := make([]*v1.Pod, 0, n)
	s := &statsapi.Summary{}
	for i := range n {
		ns := namespaces[r.IntN(len(namespaces))]
		// Duplicate names across namespaces on purpose, to exercise ties.
		p := newPod(ns, fmt.Sprintf("pod-%d", r.IntN(n+1)), priority(prios[r.IntN(len(prios))]))
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		if sz := sizes[r.IntN(len(sizes))]; sz != "" {
			memRequest(sz)(p)
			request(v1.ResourceEphemeralStorage, sz)(p)
		}
		if r.IntN(4) == 0 {
			always := v1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resourceMust("16Mi")}}}}
		}
		switch r.IntN(12) {
		case 0:
			annotation(ConfigMirrorAnnotation, "h")(p)
			mirrorOwner("n1", "u1")(p)
		case 1:
			ownedBy("DaemonSet", "ds", true)(p)
		case 2:
			annotation(OptOutAnnotation, "false")(p)
		case 3:
			phase(v1.PodSucceeded)(p)
		case 4:
			terminating()(p)
		}
		if r.IntN(8) != 0 { // some pods have no stats at all
			ps := podStats(p)
			if r.IntN(6) != 0 {
				ws := uint64(r.IntN(2048)) << 20
				ps.Memory = &statsapi.MemoryStats{WorkingSetBytes: &ws}
			}
			if r.IntN(6) != 0 {
				used, inodes := uint64(r.IntN(2048))<<20, uint64(r.IntN(5000))
				ps.EphemeralStorage = &statsapi.FsStats{UsedBytes: &used, InodesUsed: &inodes}
			}
			if r.IntN(6) != 0 {
				n := uint64(r.IntN(500))
				ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: &n}
			}
			s.Pods = append(s.Pods, ps)
		}
		pods = append(pods, p)
	}
	return pods, s
}

func propertyOptions() Options {
	return Options{
		PriorityGroups: []PriorityGroup{
			{Name: "batch", Namespaces: []string{"batch"}, Offset: -500},
			{Name: "tenants", Selector: labels.SelectorFromSet(labels.Set{"tenant": "true"}), Offset: 10, Fence: true},
		},
		NamespaceLabels:    map[string]map[string]string{"tenant-a": {"tenant": "true"}, "tenant-b": {"tenant": "true"}},
		ExcludedNamespaces: []string{"infra"},
	}
}

func TestRankProperties(t *testing.T) {
	opts := propertyOptions()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 42))
		pods, summary := randomNode(r, r.IntN(80))
		for _, sig := range thresholds.Signals() {
			res := Rank(sig, summary, pods, opts)
			where := fmt.Sprintf("seed %d, %s", seed, sig)
			if len(res.Candidates) != len(pods) {
				t.Fatalf("%s: %d candidates for %d pods", where, len(res.Candidates), len(pods))
			}
			checkOrderInvariants(t, where, sig, res)

			// The order does not depend on the input order.
			shuffled := append([]*v1.Pod(nil), pods...)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			statsShuffled := *summary
			statsShuffled.Pods = append([]statsapi.PodStats(nil), summary.Pods...)
			r.Shuffle(len(statsShuffled.Pods), func(i, j int) {
				statsShuffled.Pods[i], statsShuffled.Pods[j] = statsShuffled.Pods[j], statsShuffled.Pods[i]
			})
			if again := Rank(sig, &statsShuffled, shuffled, opts); !reflect.DeepEqual(again, res) {
				t.Fatalf("%s: shuffled input changed the ranking:\n%v\n%v", where, names(res), names(again))
			}
		}
	}
}

func checkOrderInvariants(t *testing.T, where string, sig thresholds.Signal, res Result) {
	t.Helper()
	seenIneligible, seenNoUsage, seenUnder := false, false, false
	for i, c := range res.Candidates {
		if c.Eligible != (c.SkipReason == "") {
			t.Fatalf("%s: %s/%s eligible=%v with reason %q", where, c.Namespace, c.Name, c.Eligible, c.SkipReason)
		}
		if !c.Eligible {
			seenIneligible = true
			continue
		}
		if seenIneligible {
			t.Fatalf("%s: eligible %s/%s at %d follows an ineligible pod", where, c.Namespace, c.Name, i)
		}
		if c.Priority >= SystemCriticalPriority {
			t.Fatalf("%s: critical %s/%s is eligible", where, c.Namespace, c.Name)
		}
		if !c.HasUsage {
			seenNoUsage = true
		} else if seenNoUsage {
			t.Fatalf("%s: %s/%s with usage follows a pod without", where, c.Namespace, c.Name)
		}
		if c.ExceedsRequest && seenUnder {
			t.Fatalf("%s: %s/%s over its request follows a pod under its request", where, c.Namespace, c.Name)
		}
		if c.HasUsage && !c.ExceedsRequest {
			seenUnder = true
		}
		if c.ExceedsRequest != (sig != thresholds.PIDAvailable && c.HasUsage && c.Usage > c.Request) {
			t.Fatalf("%s: %s/%s exceedsRequest=%v with usage %d request %d", where, c.Namespace, c.Name, c.ExceedsRequest, c.Usage, c.Request)
		}
		if i > 0 {
			prev := res.Candidates[i-1]
			if prev.Eligible && prev.HasUsage == c.HasUsage && prev.ExceedsRequest == c.ExceedsRequest && prev.EffectivePriority > c.EffectivePriority {
				t.Fatalf("%s: effective priority %d before %d within one class", where, prev.EffectivePriority, c.EffectivePriority)
			}
		}
	}
}
