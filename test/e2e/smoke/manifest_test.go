// SPDX-License-Identifier: Apache-2.0

package smoke

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/evictd/evictd/test/e2e/framework"
)

func newPriorityClass() *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe"}, Value: 1000}
}

func readManifest(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	p, err := framework.ManifestPath()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.ReadManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// testManifestDryRun creates every object of deploy/daemonset.yaml as a
// server-side dry run. The Namespace, ServiceAccount and RBAC objects were
// applied for real when the cluster started (that is how evictd's identity
// exists), so for those "already exists" is the expected answer: they passed
// the real create already.
func testManifestDryRun(t *testing.T, c *framework.Cluster) {
	kinds := map[string]bool{}
	for _, obj := range readManifest(t) {
		kinds[obj.GetKind()] = true
		t.Run(obj.GetKind()+"/"+obj.GetName(), func(t *testing.T) {
			ri, err := c.ResourceFor(obj)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			got, err := ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			if apierrors.IsAlreadyExists(err) && framework.IsIdentityObject(obj) {
				return
			}
			if err != nil {
				t.Fatalf("server-side dry run refused it: %v", err)
			}
			if got.GetKind() != obj.GetKind() || got.GetName() != obj.GetName() {
				t.Errorf("dry run returned %s/%s", got.GetKind(), got.GetName())
			}
			if _, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a dry run left %s %s behind (get: %v)", obj.GetKind(), obj.GetName(), err)
			}
		})
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"} {
		if !kinds[k] {
			t.Errorf("manifest has no %s", k)
		}
	}
}

// TestManifestContract checks deploy/daemonset.yaml against what the design
// promises, without a cluster.
func TestManifestContract(t *testing.T) {
	var ds *appsv1.DaemonSet
	for _, obj := range readManifest(t) {
		if obj.GetKind() == "DaemonSet" {
			ds = &appsv1.DaemonSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, ds, true); err != nil {
				t.Fatalf("DaemonSet does not decode strictly: %v", err)
			}
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in the manifest")
	}
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	ctr := spec.Containers[0]
	sc := ctr.SecurityContext
	hostPaths := map[string]string{} // volume -> host path
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounted := map[string]corev1.VolumeMount{} // host path -> mount
	for _, m := range ctr.VolumeMounts {
		if hp, ok := hostPaths[m.Name]; ok {
			mounted[hp] = m
		}
	}
	nodeNameFromDownwardAPI := slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	})
	metricsPort := slices.ContainsFunc(ctr.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })

	checks := []struct {
		name string
		ok   bool
	}{
		{"priorityClassName system-node-critical", spec.PriorityClassName == "system-node-critical"},
		{"tolerates every taint", len(spec.Tolerations) == 1 && spec.Tolerations[0].Operator == corev1.TolerationOpExists && spec.Tolerations[0].Key == "" && spec.Tolerations[0].Effect == ""},
		{"NODE_NAME from the downward API", nodeNameFromDownwardAPI},
		{"run --host-root=/host --node-name=$(NODE_NAME)", len(ctr.Args) > 0 && ctr.Args[0] == "run" && slices.Contains(ctr.Args, "--host-root=/host") && slices.Contains(ctr.Args, "--node-name=$(NODE_NAME)")},
		// No CPU limit to throttle it on a busy node; the memory limit equals
		// the request, and GOMEMLIMIT sits under it. (The OOM killer stays off
		// it through system-node-critical, above, whatever the QoS.)
		{"a CPU request and no CPU limit", !ctr.Resources.Requests.Cpu().IsZero() && ctr.Resources.Limits.Cpu().IsZero()},
		{"memory request equals memory limit", ctr.Resources.Requests.Memory().Cmp(*ctr.Resources.Limits.Memory()) == 0 && !ctr.Resources.Limits.Memory().IsZero()},
		{"GOMEMLIMIT under the memory limit", goMemLimitUnder(&ctr)},
		{"liveness tolerates a slow node: 5 s per probe, a minute of failures", ctr.LivenessProbe != nil && ctr.LivenessProbe.TimeoutSeconds >= 5 &&
			ctr.LivenessProbe.PeriodSeconds*ctr.LivenessProbe.FailureThreshold >= 60},
		{"read-only root filesystem", sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		{"no privilege escalation", sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
		{"not privileged", sc != nil && (sc.Privileged == nil || !*sc.Privileged)},
		{"drops ALL capabilities", sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"})},
		// IPC_LOCK: evictd locks its memory (--lock-memory), so the node's
		// thrash cannot page it out; nothing else needs it.
		{"adds only DAC_READ_SEARCH, IPC_LOCK and SYS_RESOURCE", sc != nil && sc.Capabilities != nil && slices.Equal(sc.Capabilities.Add, []corev1.Capability{"DAC_READ_SEARCH", "IPC_LOCK", "SYS_RESOURCE"})},
		{"does not turn the memory lock off", !slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--lock-memory") })},
		{"metrics port named metrics", metricsPort},
		{"liveness /healthz on metrics", ctr.LivenessProbe != nil && ctr.LivenessProbe.HTTPGet != nil && ctr.LivenessProbe.HTTPGet.Path == "/healthz" && ctr.LivenessProbe.HTTPGet.Port.StrVal == "metrics"},
		{"startup /healthz on metrics, 3 minutes", ctr.StartupProbe != nil && ctr.StartupProbe.HTTPGet != nil && ctr.StartupProbe.HTTPGet.Path == "/healthz" &&
			ctr.StartupProbe.PeriodSeconds*ctr.StartupProbe.FailureThreshold >= 180},
		{"readiness /readyz on metrics", ctr.ReadinessProbe != nil && ctr.ReadinessProbe.HTTPGet != nil && ctr.ReadinessProbe.HTTPGet.Path == "/readyz" && ctr.ReadinessProbe.HTTPGet.Port.StrVal == "metrics"},
		{"no host network, PID or IPC", !spec.HostNetwork && !spec.HostPID && !spec.HostIPC},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("DaemonSet: %s: not so", c.name)
		}
	}
	for hp, want := range map[string]string{"/sys/fs/cgroup": "/host/sys/fs/cgroup", "/proc": "/host/proc", "/var/lib/kubelet": "/host/var/lib/kubelet", "/var/log/pods": "/host/var/log/pods", "/var/lib/containerd": "/host/var/lib/containerd"} {
		m, ok := mounted[hp]
		switch {
		case !ok:
			t.Errorf("hostPath %s is not mounted", hp)
		case m.MountPath != want || !m.ReadOnly:
			t.Errorf("hostPath %s mounted at %s (read-only %v), want read-only at %s", hp, m.MountPath, m.ReadOnly, want)
		}
	}
	if len(hostPaths) != 5 {
		t.Errorf("hostPath volumes %v, want exactly the five above", hostPaths)
	}
	for _, m := range ctr.VolumeMounts {
		if !m.ReadOnly && strings.HasPrefix(m.MountPath, "/host") {
			t.Errorf("writable host mount %s", m.MountPath)
		}
	}
}

// goMemLimitUnder: the container sets GOMEMLIMIT (a plain byte count or one
// with an IEC suffix, as the Go runtime reads it) below its memory limit.
func goMemLimitUnder(ctr *corev1.Container) bool {
	limit := ctr.Resources.Limits.Memory().Value()
	for _, e := range ctr.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		v := e.Value
		mult := int64(1)
		for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
			if strings.HasSuffix(v, suffix) {
				v, mult = strings.TrimSuffix(v, suffix), m
			}
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(v, "B"), 10, 64)
		return err == nil && n > 0 && n*mult < limit
	}
	return false
}
