// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/pkg/agent/imagegc"
	"github.com/evictd/evictd/pkg/agent/inflight"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Values a workload's pod carries that a trace must not: none is read by a
// decision.
const (
	secretEnv        = "env-value-s3cr3t"
	secretEnvFrom    = "db-credentials-secret"
	secretArg        = "--password=arg-s3cr3t"
	secretCommand    = "/bin/start-with-s3cr3t"
	secretAnnotation = "annotation-s3cr3t-token"
	secretApplied    = "last-applied-s3cr3t"
	secretPull       = "pull-s3cr3t"
	secretProbe      = "probe-s3cr3t"
	secretLabel      = "label-s3cr3t"
	secretHostPath   = "/host/s3cr3t"
	secretGitRepo    = "https://user:git-s3cr3t@git.example/repo"
	secretConfigMap  = "configmap-s3cr3t"
	secretMessage    = "termination-message-s3cr3t"
)

func qty(s string) resource.Quantity { return resource.MustParse(s) }

// wholePod is a workload's pod as the API server serves it: what the
// decisions read (varied by i, so that every rule's input differs between
// pods) and much they do not, with secret-looking values.
func wholePod(i int) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	grace := int64(10 + i)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: []string{"tenant-a", "tenant-b", "kube-system"}[i%3],
			UID: types.UID(podUID(i)), ResourceVersion: fmt.Sprint(100 + i), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			Labels: map[string]string{"app": "web", "token": secretLabel},
			Annotations: map[string]string{
				"example.com/db-password": secretAnnotation,
				v1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"env":[{"name":"PASSWORD","value":"` +
					secretApplied + `"}]}]}}`,
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c", UID: "rs-uid",
				Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: v1.PodSpec{
			NodeName: "node-a", ServiceAccountName: "web", TerminationGracePeriodSeconds: &grace,
			ImagePullSecrets:  []v1.LocalObjectReference{{Name: secretPull}},
			PriorityClassName: []string{"standard", "", "high"}[i%3],
			InitContainers: []v1.Container{{Name: "sidecar", Image: "registry.example/proxy:1", RestartPolicy: &always,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: qty(fmt.Sprintf("%dMi", 16*(i%4+1)))}}}},
			Containers: []v1.Container{{
				Name: "app", Image: fmt.Sprintf("registry.example/app:%d", i%2), Command: []string{secretCommand}, Args: []string{secretArg},
				Env: []v1.EnvVar{{Name: "PASSWORD", Value: secretEnv},
					{Name: "DB", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: secretEnvFrom}, Key: "pw"}}}},
				EnvFrom:       []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: secretEnvFrom}}}},
				LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{secretProbe}}}},
				VolumeMounts:  []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceMemory: qty(fmt.Sprintf("%dMi", 64*(i%5))), v1.ResourceEphemeralStorage: qty(fmt.Sprintf("%dMi", 10*(i%3)))},
					Limits:   v1.ResourceList{v1.ResourceMemory: qty("1Gi")}},
			}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug",
				Image: "registry.example/debug:1", Command: []string{secretCommand}}}},
			Volumes: []v1.Volume{
				{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr(qty("1Gi"))}}},
				{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: secretHostPath}}},
				{Name: "repo", VolumeSource: v1.VolumeSource{GitRepo: &v1.GitRepoVolumeSource{Repository: secretGitRepo}}},
				{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: secretConfigMap}}}},
				{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secretEnvFrom}}},
				{Name: "model", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "registry.example/model:3"}}},
			},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBurstable, PodIP: "10.0.0.1",
			// The image the container runs: the one its spec named before an
			// update that has not restarted it yet.
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Image: "registry.example/app:running", ImageID: "sha256:app",
				ContainerID: "containerd://abc", LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Message: secretMessage}}}},
		},
	}
	// Each rule's input, one pod each.
	switch i % 12 {
	case 1:
		p.Annotations[rank.ConfigSourceAnnotation] = "file"
	case 2:
		p.Annotations[rank.ConfigMirrorAnnotation] = "abc"
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "node-a-uid", Controller: ptr(true)}}
	case 3:
		p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "DaemonSet", "agent"
	case 4:
		p.Annotations[rank.OptOutAnnotation] = "false"
	case 5:
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: t0.Add(20 * time.Second)}, ptr(int64(30))
	case 6:
		p.Status.Phase = v1.PodSucceeded
	case 7:
		p.Spec.Priority = ptr(int32(2_000_000_000))
	case 8:
		p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: qty("300Mi")}, Claims: []v1.ResourceClaim{{Name: "gpu"}}}
	case 9:
		p.Status.AllocatedResources = v1.ResourceList{v1.ResourceMemory: qty("200Mi")}
	case 10:
		p.Status.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceMemory: qty("96Mi")}
		p.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: qty("8Mi")}
	case 11:
		p.Annotations[rank.OptOutAnnotation] = "true"
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// summaryOf is the kubelet's figures for pods: memory, processes, and the
// ephemeral storage of each part, volumes included (local and not).
func summaryOf(pods []*v1.Pod) *statsapi.Summary {
	cap100, inodes := u64(100<<30), u64(1<<20)
	s := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node-a",
		Fs:      &statsapi.FsStats{CapacityBytes: cap100, Inodes: inodes},
		Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{CapacityBytes: cap100, Inodes: inodes}}}}
	for i, p := range pods {
		mb := func(k int) *uint64 { return u64(uint64(k) << 20) }
		fs := func(k int) statsapi.FsStats { return statsapi.FsStats{UsedBytes: mb(k), InodesUsed: u64(uint64(k))} }
		ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
			Memory:           &statsapi.MemoryStats{WorkingSetBytes: mb(50 + 37*i%300)},
			ProcessStats:     &statsapi.ProcessStats{ProcessCount: u64(uint64(1 + 7*i%13))},
			EphemeralStorage: &statsapi.FsStats{UsedBytes: mb(100 + i), InodesUsed: u64(50)},
			Containers:       []statsapi.ContainerStats{{Name: "app", Rootfs: ptr(fs(5 * (i % 4))), Logs: ptr(fs(i % 3))}},
		}
		for k, v := range p.Spec.Volumes {
			ps.VolumeStats = append(ps.VolumeStats, statsapi.VolumeStats{Name: v.Name, FsStats: fs(3*k + i%5)})
		}
		s.Pods = append(s.Pods, ps)
	}
	return s
}

// recordAndRead records pods in one pass of a trace and reads them back.
func recordAndRead(t *testing.T, pods []*v1.Pod) ([]*v1.Pod, []byte) {
	t.Helper()
	r := NewRecorder(Header{Node: "node-a"}, DefaultBudget)
	r.Begin(1, 0, t0, Wakeup{Source: "timer"})
	r.PodState(pods, map[string]int32{"standard": 1000, "high": 1_000_000}, nil, testNode("1"))
	r.End()
	tr, raw := export(t, r)
	if len(tr.Passes) != 1 || tr.Passes[0].Pods == nil {
		t.Fatalf("the trace holds %d passes, want one with the pod list", len(tr.Passes))
	}
	return tr.Passes[0].Pods.Pods, gunzip(t, raw)
}

// TestTraceCarriesNoWorkloadConfiguration: /trace is served to a reader
// role that sees what evictd decides on, not the workloads' configuration:
// a pod with env values, args, commands, a secret-looking annotation,
// last-applied-configuration, image pull secrets and volume sources is
// recorded with none of them, and keeps what the decisions read.
func TestTraceCarriesNoWorkloadConfiguration(t *testing.T) {
	pods := []*v1.Pod{wholePod(0), wholePod(4)}
	got, raw := recordAndRead(t, pods)
	for _, s := range []string{secretEnv, secretEnvFrom, secretArg, secretCommand, secretAnnotation, secretApplied, secretPull,
		secretProbe, secretLabel, secretHostPath, secretGitRepo, secretConfigMap, secretMessage,
		v1.LastAppliedConfigAnnotation, "example.com/db-password", "managedFields", "10.0.0.1", "containerd://abc"} {
		if bytes.Contains(raw, []byte(s)) {
			i := bytes.Index(raw, []byte(s))
			t.Errorf("the trace carries %q: ...%s...", s, raw[max(i-80, 0):min(i+len(s)+20, len(raw))])
		}
	}
	opted := got[1]
	if opted.Annotations[rank.OptOutAnnotation] != "false" || len(opted.Annotations) != 1 {
		t.Errorf("the opted-out pod's annotations recorded as %v, want %s=false alone", opted.Annotations, rank.OptOutAnnotation)
	}
	if c := got[0].Spec.Containers; len(c) != 1 || c[0].Image != "registry.example/app:0" || !c[0].Resources.Requests.Memory().IsZero() ||
		c[0].Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("the app container recorded as %+v, want its image, requests and limits", c)
	}
	for i := range pods {
		if len(pods[i].Spec.Containers[0].Env) != 2 || pods[i].Annotations[v1.LastAppliedConfigAnnotation] == "" {
			t.Errorf("the caller's pod %s was pruned in place", pods[i].Name)
		}
	}
}

// TestPrunedPodsDecideAsWhole: every decision a trace's pods feed (the
// ranking under each signal, with and without DaemonSet pods, priority
// groups and excluded namespaces; the grace period a call asks; the
// node's unused images; the pods in flight) comes out the same from the
// pods read back from a trace as from the whole pods, for pods that vary
// every input those decisions read.
func TestPrunedPodsDecideAsWhole(t *testing.T) {
	var whole []*v1.Pod
	for i := range 36 {
		whole = append(whole, wholePod(i))
	}
	pruned, _ := recordAndRead(t, whole)
	if len(pruned) != len(whole) {
		t.Fatalf("%d pods read back, want %d", len(pruned), len(whole))
	}
	if len(pruned[0].Spec.Containers[0].Env) != 0 {
		t.Fatal("the trace's pods are whole: this test compares nothing")
	}
	summary := summaryOf(whole)
	groups := []rank.PriorityGroup{{Name: "tenants", Namespaces: []string{"tenant-b"}, Offset: -100},
		{Name: "system", Selector: labels.SelectorFromSet(labels.Set{"tier": "system"}), Offset: 500, Fence: true}}
	optsList := map[string]rank.Options{
		"defaults": {PriorityClasses: map[string]int32{"standard": 1000, "high": 1_000_000}, Node: rank.NodeRef{Name: "node-a", UID: "node-a-uid"},
			OptOut: rank.OptOut{Namespaces: []string{"tenant-a", "tenant-b", "kube-system"}}},
		"no opt-out, no node": {},
		"daemonsets":          {IncludeDaemonSetPods: true},
		"groups":              {PriorityGroups: groups, NamespaceLabels: map[string]map[string]string{"kube-system": {"tier": "system"}}},
		"excluded":            {ExcludedNamespaces: []string{"tenant-a"}},
		"working set":         {WorkingSetOnly: true},
		"stall, high":         {PodStall: map[string]rank.PodStall{podUID(3): {Some: 0.5, Full: 0.3}}, MemoryHigh: map[string]rank.PodMemoryHigh{podUID(0): {Container: "app", Stuck: true}}},
		"known layout":        {DiskParts: map[string]rank.DiskParts{podUID(1): {WritableLayer: rank.DiskUse{Bytes: 1 << 20}}}},
	}
	strip := func(cs []rank.Candidate) []rank.Candidate {
		for i := range cs {
			cs[i].Pod = nil
		}
		return cs
	}
	compared := 0
	for name, opts := range optsList {
		for _, s := range thresholds.Signals() {
			want, got := strip(rank.Rank(s, summary, whole, opts).Candidates), strip(rank.Rank(s, summary, pruned, opts).Candidates)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, %s: the pruned pods rank\n%+v\nthe whole pods\n%+v", name, s, got, want)
			}
			compared++
		}
		for i := range whole {
			if got, want := rank.SkipReason(pruned[i], opts), rank.SkipReason(whole[i], opts); got != want {
				t.Errorf("%s: pod %s skipped for %q, whole %q", name, whole[i].Name, got, want)
			}
		}
	}
	// The rules' inputs did vary: a ranking that read none of them would
	// compare equal too.
	var reasons []string
	for _, c := range rank.Rank(thresholds.MemoryAvailable, summary, pruned, optsList["defaults"]).Candidates {
		if c.SkipReason != "" {
			reasons = append(reasons, strings.SplitN(c.SkipReason, ":", 2)[0])
		}
	}
	for _, want := range []string{rank.CheckMirror, rank.CheckCritical, rank.CheckDaemonSet, rank.CheckTerminating, rank.CheckFinished, rank.CheckOptOut} {
		if !strings.Contains(strings.Join(reasons, " "), want) {
			t.Errorf("no pod skipped for %s (skipped: %v): the pods do not exercise it", want, reasons)
		}
	}

	eo := evict.Defaults()
	for i := range whole {
		for _, hard := range []bool{false, true} {
			if got, want := eo.GracePeriod(pruned[i], hard, nil), eo.GracePeriod(whole[i], hard, nil); got != want {
				t.Errorf("pod %s: grace period %d, whole %d", whole[i].Name, got, want)
			}
		}
	}

	node := testNode("1")
	node.Status.Images = nil
	for _, img := range []string{"registry.example/app:0", "registry.example/app:1", "registry.example/proxy:1", "registry.example/debug:1",
		"registry.example/model:3", "registry.example/app:running", "registry.example/unused:9"} {
		node.Status.Images = append(node.Status.Images, v1.ContainerImage{Names: []string{img}, SizeBytes: 1 << 20})
	}
	old := func(v1.ContainerImage) bool { return true }
	wb, wn := imagegc.Unused(node, whole, old)
	gb, gn := imagegc.Unused(node, pruned, old)
	if gb != wb || gn != wn || wn != 1 {
		t.Errorf("unused images: %d (%d bytes) from the pruned pods, %d (%d bytes) whole; want 1 (the unused one)", gn, gb, wn, wb)
	}

	syncs := func(pods []*v1.Pod) string {
		// Even pods evicted, the terminating (odd) ones found so; the
		// first three gone.
		s := inflight.New(inflight.Options{GoneTimeout: time.Minute})
		for i := 0; i < len(pods); i += 2 {
			s.Add(inflight.Added{Pod: pods[i], Origin: inflight.Evicted, Signal: thresholds.MemoryAvailable, At: t0, GraceSeconds: 30})
		}
		gone, expired := s.Sync(pods[3:], t0.Add(10*time.Second))
		return fmt.Sprintf("%+v %+v %+v", gone, expired, s.Snapshot())
	}
	if got, want := syncs(pruned), syncs(whole); got != want {
		t.Errorf("pods in flight from the pruned pods:\n%s\nwhole:\n%s", got, want)
	}
	t.Logf("%d rankings, %d pods: the same from the pruned pods", compared, len(whole))
}

// TestReadsFormat2: a trace an older agent wrote (format 2, whole pods)
// still reads, its pods as written; replaying it decides as its pruned
// pods would (TestPrunedPodsDecideAsWhole, and pkg/agent's
// TestReplayOfPrunedPodsMakesTheWholePodsCalls replays one).
func TestReadsFormat2(t *testing.T) {
	pod := wholePod(4)
	pod.ManagedFields = nil // format 2 left them out
	in := lines(t, line{Header: &Header{Format: 2, Node: "node-a", Passes: 1}},
		line{Pass: &Pass{N: 1, At: t0, Wakeup: Wakeup{Source: "timer"}, Pods: &Pods{Pods: []*v1.Pod{pod}}}})
	tr, err := Read(bytes.NewReader(gzipped(in)))
	if err != nil {
		t.Fatalf("a format 2 trace: %v", err)
	}
	if tr.Header.Format != 2 || len(tr.Passes) != 1 || tr.Passes[0].Pods == nil || len(tr.Passes[0].Pods.Pods) != 1 {
		t.Fatalf("read as %+v", tr)
	}
	got, _ := json.Marshal(tr.Passes[0].Pods.Pods[0])
	if want, _ := json.Marshal(pod); !bytes.Equal(got, want) {
		t.Errorf("the format 2 pod read back as\n%s\nwant as written\n%s", got, want)
	}
}

// TestPruneKeepsContainerStateKinds: whether each container runs, waits or
// has terminated is what tells a victim's teardown moving
// (pkg/agent/inflight), so a replay sees it as the agent did; the state's
// reason, message and times are the workload's and stay out.
func TestPruneKeepsContainerStateKinds(t *testing.T) {
	p := wholePod(5)
	p.Status.ContainerStatuses = []v1.ContainerStatus{
		{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 143, Reason: "Error", Message: secretMessage}}},
		{Name: "b", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
		{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: secretMessage}}},
		{Name: "d"},
	}
	got := PrunePod(p).Status.ContainerStatuses
	want := []v1.ContainerState{{Terminated: &v1.ContainerStateTerminated{}}, {Running: &v1.ContainerStateRunning{}},
		{Waiting: &v1.ContainerStateWaiting{}}, {}}
	if len(got) != len(want) {
		t.Fatalf("%d statuses kept, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].State, want[i]) {
			t.Errorf("container %s: state kept as %+v, want %+v", got[i].Name, got[i].State, want[i])
		}
	}
}
