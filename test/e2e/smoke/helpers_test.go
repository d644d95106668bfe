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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

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
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: ns, Labels: s.labels},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To(grace),
			Containers: []corev1.Container{{
				Name:    "main",
				Image:   "evictd.test/workload:latest",
				Command: []string{"workload"},
				Args:    s.args,
				Resources: corev1.ResourceRequirements{
					Requests: s.requests,
					Limits:   s.limits,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
			}},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

func resources(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return l
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPod polls the pod until cond holds.
func waitPod(t *testing.T, client kubernetes.Interface, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Status
		}
		t.Fatalf("pod %s/%s never became %s within %s; last status: %+v", ns, name, what, timeout, status)
	}
	return last
}

// createRunning creates the pod and waits until it is Running and Ready.
func createRunning(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return waitPod(t, client, pod.Namespace, created.Name, 30*time.Second, "Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && isReady(p)
	})
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// cgroupOf returns the process's cgroup path in the named v1 hierarchy,
// from /proc/PID/cgroup ("4:memory:/a/b").
func cgroupOf(t *testing.T, pid int, controller string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[1] == controller {
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
