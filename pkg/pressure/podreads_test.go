// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestObserveWithReusesPods: a pass whose PodReads says no carries the last
// read's pod figures, stamped when they were read, while the node's are
// read afresh; the next pass that reads finds what changed meanwhile.
func TestObserveWithReusesPods(t *testing.T) {
	root := copyTree(t, "testdata/v2-cgroupfs")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	o, err := NewObserver(Options{HostRoot: root, CgroupRoot: "/node-a", NodeCgroup: "/node-a", Clock: clk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	ctx := context.Background()
	var asked []time.Time
	read := false
	reads := func(node *Observation, last time.Time) bool {
		t.Helper()
		asked = append(asked, last)
		if node.Summary == nil || node.Summary.Node.Memory == nil || node.Summary.Pods != nil || node.Pods != nil {
			t.Errorf("PodReads saw %+v; want the node's figures and no pods", node.Summary)
		}
		return read
	}

	// The first pass reads the pods whatever PodReads would say.
	obs, err := o.ObserveWith(ctx, reads)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 0 || len(obs.Summary.Pods) != 3 || obs.PodsAge != 0 {
		t.Fatalf("first pass: asked %v, %d pods, age %v; want not asked, 3 pods read now", asked, len(obs.Summary.Pods), obs.PodsAge)
	}
	usageB := *podStats(t, obs, uidB).Memory.UsageBytes
	nodeUsage := *obs.Summary.Node.Memory.UsageBytes

	cg := filepath.Join(root, "sys/fs/cgroup/node-a")
	writeInPlace(t, filepath.Join(cg, "kubepods/burstable/pod"+uidB, "memory.current"), "300000000\n")
	if err := os.RemoveAll(filepath.Join(cg, "kubepods/besteffort/pod"+uidBE)); err != nil {
		t.Fatal(err)
	}
	writeInPlace(t, filepath.Join(cg, "memory.current"), "1234567890\n")
	clk.SetTime(t0.Add(3 * time.Second))
	obs, err = o.ObserveWith(ctx, reads)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !asked[0].Equal(t0) {
		t.Errorf("PodReads asked with last reads %v; want once, %v", asked, t0)
	}
	if obs.PodsAge != 3*time.Second || len(obs.Summary.Pods) != 3 || len(obs.Pods) != 3 {
		t.Errorf("reused: age %v, %d pods (%d extras); want 3s, the 3 pods of the last read", obs.PodsAge, len(obs.Summary.Pods), len(obs.Pods))
	}
	b := podStats(t, obs, uidB)
	if *b.Memory.UsageBytes != usageB || !b.Memory.Time.Time.Equal(t0) {
		t.Errorf("reused burstable pod: usage %d at %v; want %d at %v", *b.Memory.UsageBytes, b.Memory.Time, usageB, t0)
	}
	if u := *obs.Summary.Node.Memory.UsageBytes; u == nodeUsage || !obs.Summary.Node.Memory.Time.Time.Equal(t0.Add(3*time.Second)) {
		t.Errorf("node usage %d at %v in a reusing pass; want it read afresh", u, obs.Summary.Node.Memory.Time)
	}

	read = true
	clk.SetTime(t0.Add(4 * time.Second))
	obs, err = o.ObserveWith(ctx, reads)
	if err != nil {
		t.Fatal(err)
	}
	if obs.PodsAge != 0 || len(obs.Summary.Pods) != 2 {
		t.Fatalf("read again: age %v, %d pods; want 0 and 2 (one deleted)", obs.PodsAge, len(obs.Summary.Pods))
	}
	if b := podStats(t, obs, uidB); *b.Memory.UsageBytes != 300000000 || !b.Memory.Time.Time.Equal(t0.Add(4*time.Second)) {
		t.Errorf("burstable pod read again: usage %d at %v; want 300000000 now", *b.Memory.UsageBytes, b.Memory.Time)
	}

	// Kubepods unreadable (the kubelet taking it away): the pods are listed
	// whatever PodReads says, and the observation fails as it always did.
	read = false
	asked = nil
	if err := os.Remove(filepath.Join(cg, "kubepods/memory.current")); err != nil {
		t.Fatal(err)
	}
	o.kubepods.mem.close(&o.openFiles)
	if err := os.RemoveAll(filepath.Join(cg, "kubepods")); err != nil {
		t.Fatal(err)
	}
	if obs, err := o.ObserveWith(ctx, reads); err == nil || len(asked) != 0 {
		t.Errorf("kubepods gone: %d pods, asked %d times, err %v; want an error without asking", podCount(obs), len(asked), err)
	}
}

// TestReusedPassCarriesTheLastReadWhole: a pass that reuses the pods
// carries the last read's pods as they were, names and ephemeral-storage
// figures included, only older; the walks wait for the next pass that
// reads. The trace leaves such a pass's pods out and gives back exactly
// this (trace.Read).
func TestReusedPassCarriesTheLastReadWhole(t *testing.T) {
	root := copyTree(t, "testdata/v1-cgroupfs")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	o, err := NewObserver(Options{HostRoot: root, EphemeralRefresh: 10 * time.Second, Clock: clk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	ctx := context.Background()
	read := false
	reads := func(*Observation, time.Time) bool { return read }
	first, err := o.ObserveWith(ctx, reads)
	if err != nil {
		t.Fatal(err)
	}
	before := podStats(t, first, uidB).EphemeralStorage
	if before == nil {
		t.Fatal("the burstable pod has no ephemeral-storage figure in the fixture")
	}

	// Past the walks' refresh period, with more written in the pod's log
	// directory: a pass that reads would walk it again.
	logDir := filepath.Join(root, "var/log/pods/default_web-0_"+uidB)
	if err := os.WriteFile(filepath.Join(logDir, "late.log"), make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(t0.Add(15 * time.Second))
	reused, err := o.ObserveWith(ctx, reads)
	if err != nil {
		t.Fatal(err)
	}
	if reused.PodsAge != 15*time.Second {
		t.Fatalf("reused pass: pods age %v; want 15s", reused.PodsAge)
	}
	if !reflect.DeepEqual(reused.Summary.Pods, first.Summary.Pods) {
		t.Errorf("a reused pass's pods differ from the last read's (ephemeral storage %s, was %s)",
			fsString(podStats(t, reused, uidB).EphemeralStorage), fsString(before))
	}
	if len(reused.Pods) != len(first.Pods) {
		t.Fatalf("reused pass: %d pods' extras, the last read %d", len(reused.Pods), len(first.Pods))
	}
	for i, x := range reused.Pods {
		want := first.Pods[i]
		if want.EphemeralParts != nil {
			want.EphemeralAge += reused.PodsAge
		}
		if !reflect.DeepEqual(x, want) {
			t.Errorf("reused pass, pod %s: extras %+v; want the last read's, %v older: %+v", x.UID, x, reused.PodsAge, want)
		}
	}

	read = true
	clk.SetTime(t0.Add(16 * time.Second))
	again, err := o.ObserveWith(ctx, reads)
	if err != nil {
		t.Fatal(err)
	}
	if after := podStats(t, again, uidB).EphemeralStorage; after == nil || *after.UsedBytes <= *before.UsedBytes {
		t.Errorf("the next read walked nothing new: %s, was %s", fsString(after), fsString(before))
	}
}

func podStats(t *testing.T, obs *Observation, uid string) *statsv1alpha1.PodStats {
	t.Helper()
	for i := range obs.Summary.Pods {
		if obs.Summary.Pods[i].PodRef.UID == uid {
			return &obs.Summary.Pods[i]
		}
	}
	t.Fatalf("pod %s not in the observation", uid)
	return nil
}
