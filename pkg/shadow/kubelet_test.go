// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// evictedByKubelet137 is a pod as the kubelet of Kubernetes 1.37 leaves one
// its eviction manager evicted for a hard memory threshold: the status it
// writes through pods/status once the container is killed (phase Failed,
// reason Evicted, the message, the DisruptionTarget condition stamped then;
// its own conditions false, the container terminated).
const evictedByKubelet137 = `{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "hog", "namespace": "shop", "uid": "6f1c2a8e-55b1-4bb0-9d0e-2f4a3c1d9e77", "generation": 1},
  "spec": {"nodeName": "n1", "containers": [{"name": "hog", "image": "registry.example.com/hog:1",
    "resources": {"requests": {"memory": "128Mi"}}}]},
  "status": {
    "phase": "Failed",
    "reason": "Evicted",
    "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90112Ki. Container hog was using 1201348Ki, request is 128Mi, has larger consumption of memory. ",
    "conditions": [
      {"type": "DisruptionTarget", "status": "True", "observedGeneration": 1, "lastProbeTime": null,
       "lastTransitionTime": "2026-11-25T12:00:09Z", "reason": "TerminationByKubelet",
       "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90112Ki. Container hog was using 1201348Ki, request is 128Mi, has larger consumption of memory. "},
      {"type": "PodReadyToStartContainers", "status": "False", "observedGeneration": 1, "lastProbeTime": null, "lastTransitionTime": "2026-11-25T12:00:10Z"},
      {"type": "Initialized", "status": "True", "observedGeneration": 1, "lastProbeTime": null, "lastTransitionTime": "2026-11-25T11:58:01Z"},
      {"type": "Ready", "status": "False", "observedGeneration": 1, "lastProbeTime": null, "lastTransitionTime": "2026-11-25T12:00:09Z", "reason": "PodFailed"},
      {"type": "ContainersReady", "status": "False", "observedGeneration": 1, "lastProbeTime": null, "lastTransitionTime": "2026-11-25T12:00:09Z", "reason": "PodFailed"},
      {"type": "PodScheduled", "status": "True", "observedGeneration": 1, "lastProbeTime": null, "lastTransitionTime": "2026-11-25T11:58:00Z"}
    ],
    "hostIP": "10.0.0.5", "hostIPs": [{"ip": "10.0.0.5"}], "podIP": "10.244.1.7", "podIPs": [{"ip": "10.244.1.7"}],
    "startTime": "2026-11-25T11:58:01Z",
    "containerStatuses": [{"name": "hog", "state": {"terminated": {"exitCode": 137, "reason": "Error",
      "startedAt": "2026-11-25T11:58:02Z", "finishedAt": "2026-11-25T12:00:08Z",
      "containerID": "containerd://4b1e0d6c2f"}}, "lastState": {}, "ready": false, "restartCount": 0,
      "image": "registry.example.com/hog:1", "imageID": "registry.example.com/hog@sha256:0d3c", "containerID": "containerd://4b1e0d6c2f",
      "started": false}],
    "qosClass": "Burstable"
  }
}`

// evictedByKubelet125 is the same eviction by a kubelet before 1.26, which
// writes no DisruptionTarget condition; the pod has a sidecar that had
// finished long before.
const evictedByKubelet125 = `{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "batch-x7k2p", "namespace": "jobs", "uid": "0a9d7e11-3c0f-4f5e-8b54-91d6f0c1a2b3"},
  "spec": {"nodeName": "n1", "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}, {"name": "fetch", "image": "busybox"}]},
  "status": {
    "phase": "Failed",
    "reason": "Evicted",
    "message": "The node was low on resource: memory. Container main was using 801234Ki, which exceeds its request of 0. ",
    "conditions": [{"type": "Ready", "status": "False", "lastProbeTime": null, "lastTransitionTime": "2026-11-25T12:00:31Z", "reason": "PodFailed"}],
    "containerStatuses": [
      {"name": "fetch", "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": "2026-11-25T11:00:00Z", "finishedAt": "2026-11-25T11:00:04Z"}}, "ready": false, "restartCount": 0, "image": "busybox", "imageID": ""},
      {"name": "main", "state": {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": "2026-11-25T11:00:00Z", "finishedAt": "2026-11-25T12:00:30Z"}}, "ready": false, "restartCount": 0, "image": "busybox", "imageID": ""}
    ],
    "qosClass": "BestEffort"
  }
}`

func podJSON(t *testing.T, s string) *v1.Pod {
	t.Helper()
	var p v1.Pod
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestKubeletEviction: the kubelet's evictions are read from the pod as it
// leaves them, dated by the DisruptionTarget condition, else the last
// container's exit, else when evictd saw them; a pod the kubelet failed
// for another reason (a refused admission, a node shutdown, its own
// preemption, an OOM kill) is no eviction.
func TestKubeletEviction(t *testing.T) {
	seen := utc("2026-11-25T12:05:00Z").Add(250 * time.Millisecond)
	t.Run("1.37: the condition's time", func(t *testing.T) {
		a, ok := KubeletEviction(podJSON(t, evictedByKubelet137), seen)
		want := Action{Pod: "shop/hog", UID: "6f1c2a8e-55b1-4bb0-9d0e-2f4a3c1d9e77", At: utc("2026-11-25T12:00:09Z"), AtFrom: AtCondition,
			Why: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90112Ki. Container hog was using 1201348Ki, request is 128Mi, has larger consumption of memory. "}
		if !ok || !a.At.Equal(want.At) || a.Pod != want.Pod || a.UID != want.UID || a.AtFrom != want.AtFrom || a.Why != want.Why {
			t.Errorf("got %+v (%v), want %+v", a, ok, want)
		}
	})
	t.Run("before 1.26: the last container's exit", func(t *testing.T) {
		a, ok := KubeletEviction(podJSON(t, evictedByKubelet125), seen)
		if !ok || !a.At.Equal(utc("2026-11-25T12:00:30Z")) || a.AtFrom != AtContainerExit || a.Pod != "jobs/batch-x7k2p" {
			t.Errorf("got %+v (%v), want jobs/batch-x7k2p at 12:00:30 from the container main's exit", a, ok)
		}
	})
	t.Run("neither: when it was seen", func(t *testing.T) {
		p := podJSON(t, evictedByKubelet125)
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "main", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		if a, ok := KubeletEviction(p, seen); !ok || !a.At.Equal(seen) || a.AtFrom != AtSeen {
			t.Errorf("got %+v (%v), want it at %v, seen", a, ok, seen)
		}
	})
	t.Run("another component's DisruptionTarget is not the kubelet's time", func(t *testing.T) {
		p := podJSON(t, evictedByKubelet137)
		p.Status.Conditions[0].Reason = v1.PodReasonPreemptionByScheduler
		if a, ok := KubeletEviction(p, seen); !ok || !a.At.Equal(utc("2026-11-25T12:00:08Z")) || a.AtFrom != AtContainerExit {
			t.Errorf("got %+v (%v), want the container's exit at 12:00:08", a, ok)
		}
	})

	for _, tc := range []struct {
		name string
		edit func(*v1.Pod)
	}{
		{"refused at admission under pressure", func(p *v1.Pod) {
			// kubelet.rejectPod, with the eviction manager's reason.
			p.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "Pod was rejected: The node had condition: [MemoryPressure]. "}
		}},
		{"node shutdown", func(p *v1.Pod) {
			p.Status.Reason, p.Status.Message = "Terminated", "Pod was terminated in response to imminent node shutdown."
		}},
		{"the kubelet's preemption", func(p *v1.Pod) {
			p.Status.Reason, p.Status.Message = "Preempting", "Preempted in order to admit critical pod"
		}},
		{"OOM-killed", func(p *v1.Pod) {
			p.Status.Reason, p.Status.Message, p.Status.Conditions = "", "", nil
			p.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
		}},
		{"still running (an eviction under way, or a reason without the phase)", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := podJSON(t, evictedByKubelet137)
			tc.edit(p)
			if a, ok := KubeletEviction(p, seen); ok {
				t.Errorf("read as the kubelet's eviction: %+v", a)
			}
		})
	}
	if _, ok := KubeletEviction(nil, seen); ok {
		t.Error("a nil pod read as an eviction")
	}
}

// TestRecorderKubeletEvictedFromPods: the recorder keeps each pod's first
// sight (the informer passes a pod again as it is deleted or listed anew)
// and ignores pods the kubelet did not evict.
func TestRecorderKubeletEvictedFromPods(t *testing.T) {
	r := NewRecorder(nil, nil)
	r.now = func() time.Time { return utc("2026-11-25T12:05:00Z") }
	p := podJSON(t, evictedByKubelet137)
	r.KubeletEvicted(p)
	again := p.DeepCopy()
	again.Status.Conditions = nil // a last known state without the condition
	r.KubeletEvicted(again)
	rejected := podJSON(t, evictedByKubelet137)
	rejected.UID, rejected.Status.Message = "other", "Pod was rejected: The node had condition: [MemoryPressure]. "
	r.KubeletEvicted(rejected)
	if len(r.kubelet) != 1 || r.kubelet[0].AtFrom != AtCondition || !strings.HasPrefix(r.kubelet[0].Why, "The node was low on resource: memory.") {
		t.Errorf("kept %+v, want the hog once, dated by its condition", r.kubelet)
	}
}
