// SPDX-License-Identifier: Apache-2.0

package smoke

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/test/e2e/podtest"
	"github.com/evictd/evictd/test/nodesim"
)

const mib = 1 << 20

// podSpec describes a workload pod for the table tests.
type podSpec struct {
	name     string
	args     []string
	requests corev1.ResourceList
	limits   corev1.ResourceList
	grace    int64
	labels   map[string]string
}

func (s podSpec) build(ns, node string) *corev1.Pod {
	grace := s.grace
	if grace == 0 {
		grace = 30
	}
	return podtest.New(ns, s.name, podtest.OnNode(node), podtest.Labels(s.labels), podtest.Grace(grace),
		podtest.Run("evictd.test/workload:latest", nodesim.WorkloadCommand, s.args...),
		podtest.Resources(s.requests, s.limits), podtest.Scratch())
}

// resources builds a ResourceList; an empty quantity is left out.
func resources(cpu, memory string) corev1.ResourceList {
	return podtest.List(string(corev1.ResourceCPU), cpu, string(corev1.ResourceMemory), memory)
}

// waitPod polls the pod until cond holds.
func waitPod(t *testing.T, client kubernetes.Interface, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return podtest.WaitPod(t, client, ns, name, timeout, what, cond)
}

// createRunning creates the pod and waits until it is Running and Ready.
func createRunning(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	return podtest.CreateRunning(t, client, 30*time.Second, pod)[pod.Name]
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	v, err := cgrouptest.ReadInt(path)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// cgroupOf returns the process's cgroup path in the named v1 hierarchy,
// from /proc/PID/cgroup ("4:memory:/a/b"); on a v2-only host, where one
// hierarchy has every controller, its one line ("0::/a/b").
func cgroupOf(t *testing.T, pid int, controller string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == controller || cgrouptest.V2() && parts[0] == "0" && parts[1] == "") {
			return parts[2]
		}
	}
	t.Fatalf("pid %d has no %s cgroup in %q", pid, controller, b)
	return ""
}

// countProcs counts the processes in a v1 cgroup and its descendants (v1
// cgroup.procs lists only a cgroup's own members).
func countProcs(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "cgroup.procs" {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n += len(strings.Fields(string(b)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitLog waits until the container's log (var/log/pods/.../0.log) holds
// substr.
func waitLog(t *testing.T, node *nodesim.Node, pod *corev1.Pod, container, substr string) {
	t.Helper()
	p := filepath.Join(node.PodLogDir(pod), container, "0.log")
	var b []byte
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		b, _ = os.ReadFile(p)
		return strings.Contains(string(b), substr), nil
	})
	if !strings.Contains(string(b), substr) {
		t.Fatalf("%s never said %q; it holds %q", p, substr, b)
	}
}
