// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// PodRun is one pod StandInKubelet ran.
type PodRun struct {
	Namespace, Name string
	Args            []string
	ExitCode        int
	Output          string
}

// StandInKubelet plays the kubelet, on node, for the pods of namespace
// that selector selects: the pods of a Job whose image is evictd (a Helm
// hook, a kustomize step), which no node of the test can run as an image.
// For each such pod, still unscheduled, it binds the pod to node, mints the
// token the kubelet would project for its ServiceAccount (bound to the
// pod), runs the pod's one container as entrypoint with the container's
// args and that token in a kubeconfig ($KUBECONFIG: the process has no
// mount namespace for the token file), and reports the exit as the pod's
// phase (Succeeded on 0, else Failed), so that the Job controller counts
// it. node needs no kubelet; the pod must be left unscheduled by the
// cluster (a Node it may not fit, or no scheduler). The returned function
// stops it and returns what ran, which it also logs.
func (c *Cluster) StandInKubelet(t testing.TB, namespace, selector, node, entrypoint string) (stop func() []PodRun) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		runs []PodRun
		done = make(chan struct{})
		seen = map[string]bool{}
	)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := c.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if seen[string(p.UID)] || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
						continue
					}
					seen[string(p.UID)] = true
					run, err := c.runPod(ctx, p, node, entrypoint)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("stand-in kubelet: pod %s/%s: %v", p.Namespace, p.Name, err)
						}
						continue
					}
					t.Logf("stand-in kubelet ran pod %s/%s: %s %v: exit %d\n%s", run.Namespace, run.Name,
						filepath.Base(entrypoint), run.Args, run.ExitCode, run.Output)
					mu.Lock()
					runs = append(runs, run)
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop = func() []PodRun {
		once.Do(func() { cancel(); <-done })
		mu.Lock()
		defer mu.Unlock()
		return append([]PodRun(nil), runs...)
	}
	t.Cleanup(func() { stop() })
	return stop
}

func (c *Cluster) runPod(ctx context.Context, p *corev1.Pod, node, entrypoint string) (PodRun, error) {
	run := PodRun{Namespace: p.Namespace, Name: p.Name}
	if len(p.Spec.Containers) != 1 || len(p.Spec.Containers[0].Command) > 0 {
		return run, fmt.Errorf("want one container that runs its image's entrypoint (no command), got %d containers", len(p.Spec.Containers))
	}
	run.Args = p.Spec.Containers[0].Args
	pods := c.Admin.CoreV1().Pods(p.Namespace)
	if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{}); err != nil {
		return run, fmt.Errorf("bind to %s: %w", node, err)
	}
	tr, err := c.Admin.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return run, fmt.Errorf("token of ServiceAccount %s: %w", p.Spec.ServiceAccountName, err)
	}
	kubeconfig := filepath.Join(c.Dir, "pod-"+string(p.UID)+".kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, p.Spec.ServiceAccountName, tr.Status.Token); err != nil {
		return run, err
	}
	started := metav1.Now()
	cmd := exec.CommandContext(ctx, entrypoint, run.Args...)
	env, err := containerEnv(p)
	if err != nil {
		return run, err
	}
	cmd.Env = append([]string{"KUBECONFIG=" + kubeconfig, "PATH=/usr/bin:/bin"}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	run.Output = out.String()
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			return run, err
		}
		run.ExitCode = ee.ExitCode()
	}
	phase := corev1.PodSucceeded
	if run.ExitCode != 0 {
		phase = corev1.PodFailed
	}
	cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return run, err
	}
	cs := p.Spec.Containers[0]
	cur.Status.Phase = phase
	cur.Status.StartTime = &started
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: cs.Name, Image: cs.Image, ImageID: cs.Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(run.ExitCode), StartedAt: started, FinishedAt: metav1.Now()}}}}
	if _, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return run, fmt.Errorf("report phase %s: %w", phase, err)
	}
	return run, nil
}

// containerEnv is the pod's one container's env as the kubelet sets it:
// plain values, and the downward API's pod name and namespace. Anything
// else (a Secret, a resource field) is refused, so that a test never runs
// a pod with env it silently lacks.
func containerEnv(p *corev1.Pod) ([]string, error) {
	var env []string
	for _, e := range p.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+p.Namespace)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+p.Name)
		default:
			return nil, fmt.Errorf("env %s: the stand-in kubelet sets only plain values, metadata.namespace and metadata.name", e.Name)
		}
	}
	return env, nil
}
