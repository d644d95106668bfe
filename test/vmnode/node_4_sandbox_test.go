// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// sandboxLine is evictd's start line naming its sandbox
// (cmd/evictd/app/sandbox).
const sandboxLine = "sandbox: seccomp filter in force: open_by_handle_at, name_to_handle_at refused"

// TestNodeFileHandleAttack: the file-handle attack ("shocker") that
// CAP_DAC_READ_SEARCH allows under containerd's RuntimeDefault profile
// reads a 0600 file of the node that no mount of evictd's pod shows, in a
// pod with exactly the shipped securityContext and mounts (copied from the
// running evictd pod of the shipped manifest), when nothing refuses it;
// with the sandbox evictd enters at start, both file-handle calls answer
// EPERM and the file is never read. evictd's own log names the sandbox.
func TestNodeFileHandleAttack(t *testing.T) {
	n := sharedNode(t)
	ev := evictdPod(t, n)
	if log := evictdLog(t, n, ev); !strings.Contains(log, sandboxLine) {
		t.Fatalf("evictd's log lacks %q:\n%s", sandboxLine, log)
	}

	// A key on the node in a directory of its own that no mount of the pod
	// shows, on the ext4 filesystem of one of the pod's host directories
	// that is not that filesystem's root (the attack forges the handle of
	// the filesystem's root directory, ext4's inode 2).
	ctx := context.Background()
	out, err := n.Sh(ctx, `for d in /var/log/pods /var/lib/kubelet /var/lib/containerd; do
  m=$(stat -c %m "$d"); [ "$m" != "$d" ] && [ "$(stat -f -c %T "$d")" = ext2/ext3 ] &&
    { echo "$d $m $(awk -v m="$m" '$5 == m { r = $4 } END { print r }' /proc/self/mountinfo)"; exit 0; }
done; echo "none of the pod's host directories lies inside an ext4 filesystem" >&2; exit 1`)
	if err != nil {
		t.Fatalf("a host directory of the pod inside an ext4 filesystem: %v: %s", err, out)
	}
	// The mount point, and the directory of its filesystem it shows (a
	// bind mount shows one below the filesystem's root): the key's path
	// from the root directory the attack opens is that directory's.
	f := strings.Fields(out)
	if len(f) != 3 {
		t.Fatalf("the pod's host directory, its mount point and the mount's root: %q", out)
	}
	hostDir, mountPoint, mountRoot := f[0], f[1], f[2]
	dir := strings.TrimSuffix(mountPoint, "/") + "/evictd-handle-test"
	rel := strings.TrimPrefix(strings.TrimSuffix(mountRoot, "/")+"/evictd-handle-test/key", "/")
	secret := fmt.Sprintf("node private key %d", time.Now().UnixNano())
	if out, err := n.Sh(ctx, fmt.Sprintf(`set -e; rm -rf %[1]s; mkdir -m 0700 %[1]s; (umask 077; printf %%s '%[2]s' > %[1]s/key)`, dir, secret)); err != nil {
		t.Fatalf("the node's key: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = n.Sh(context.Background(), "rm -rf "+dir) })
	t.Logf("the node's key: %s (0600, in a 0700 directory; %s from its filesystem's root), on the filesystem mounted at %s; the attack goes through the pod's mount of %s", dir+"/key", rel, mountPoint, hostDir)

	t.Run("without the sandbox", func(t *testing.T) {
		o := runHandleAttack(t, n, ev, "none", "/host"+hostDir, rel)
		if o.NameToHandle != "" || o.OpenByHandle != "" || o.Secret != secret {
			t.Fatalf("the shipped pod spec does not let the attack read the key (%+v): the test proves nothing on this node", o)
		}
	})
	t.Run("in the sandbox", func(t *testing.T) {
		o := runHandleAttack(t, n, ev, "seccomp", "/host"+hostDir, rel)
		if o.EnterErr != "" {
			t.Fatalf("the sandbox: %s", o.EnterErr)
		}
		if o.Secret != "" {
			t.Fatalf("sandbox in force, yet the attack read the node's key: %q", o.Secret)
		}
		if o.NameErrno != 1 || o.OpenErrno != 1 {
			t.Errorf("name_to_handle_at %q (errno %d), open_by_handle_at %q (errno %d); want EPERM from both", o.NameToHandle, o.NameErrno, o.OpenByHandle, o.OpenErrno)
		}
	})
}

// handleAttackOutcome is the workload's file-handle-attack report.
type handleAttackOutcome struct {
	Sandbox      string `json:"sandbox"`
	EnterErr     string `json:"enterErr"`
	NameToHandle string `json:"nameToHandle"`
	NameErrno    int    `json:"nameErrno"`
	OpenByHandle string `json:"openByHandle"`
	OpenErrno    int    `json:"openErrno"`
	ReadErr      string `json:"readErr"`
	Secret       string `json:"secret"`
}

// runHandleAttack runs the workload's file-handle attack in a pod with the
// evictd pod's securityContexts, volumes and mounts (its service account
// token aside), through its mount at mount, and returns what it reports.
func runHandleAttack(t *testing.T, n *Node, ev *corev1.Pod, kind, mount, secret string) handleAttackOutcome {
	t.Helper()
	ctx := context.Background()
	var evictd *corev1.Container
	for i := range ev.Spec.Containers {
		if ev.Spec.Containers[i].Name == "evictd" {
			evictd = &ev.Spec.Containers[i]
		}
	}
	if evictd == nil {
		t.Fatalf("pod %s has no evictd container", ev.Name)
	}
	const token = "kube-api-access-"
	var volumes []corev1.Volume
	for _, v := range ev.Spec.Volumes {
		if !strings.HasPrefix(v.Name, token) {
			volumes = append(volumes, v)
		}
	}
	var mounts []corev1.VolumeMount
	mounted := false
	for _, m := range evictd.VolumeMounts {
		if strings.HasPrefix(m.Name, token) {
			continue
		}
		mounts = append(mounts, m)
		mounted = mounted || m.MountPath == mount
	}
	if !mounted {
		t.Fatalf("evictd's pod mounts nothing at %s: %+v", mount, evictd.VolumeMounts)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "handle-attack-" + kind, Namespace: ev.Namespace},
		Spec: corev1.PodSpec{
			NodeName:                      n.Name,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext:               ev.Spec.SecurityContext.DeepCopy(),
			Tolerations:                   ev.Spec.Tolerations,
			Volumes:                       volumes,
			Containers: []corev1.Container{{
				Name:            "attack",
				Image:           workloadImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"file-handle-attack", "--mount=" + mount, "--secret=" + secret, "--sandbox=" + kind},
				SecurityContext: evictd.SecurityContext.DeepCopy(),
				VolumeMounts:    mounts,
			}},
		},
	}
	pods := n.Cluster.Admin.CoreV1().Pods(ev.Namespace)
	_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err := n.poll(ctx, 2*time.Minute, "an earlier "+pod.Name+" gone", func(ctx context.Context) error {
		if _, err := pods.Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	if err := n.poll(ctx, 3*time.Minute, pod.Name+" done", func(ctx context.Context) error {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return nil
		case corev1.PodFailed:
			return fmt.Errorf("failed: %+v", p.Status.ContainerStatuses)
		}
		return fmt.Errorf("phase %s", p.Status.Phase)
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
	log, err := n.Sh(ctx, fmt.Sprintf("cat /var/log/pods/%s_%s_%s/attack/*.log", created.Namespace, created.Name, created.UID))
	if err != nil {
		t.Fatalf("%s's log: %v", pod.Name, err)
	}
	for _, line := range strings.Split(log, "\n") {
		// CRI log lines: time stream tag content.
		if f := strings.SplitN(line, " ", 4); len(f) == 4 && strings.HasPrefix(f[3], "{") {
			var o handleAttackOutcome
			if err := json.Unmarshal([]byte(f[3]), &o); err != nil {
				t.Fatalf("%s's report %q: %v", pod.Name, f[3], err)
			}
			t.Logf("attack (sandbox %s) in the shipped pod spec: %+v", kind, o)
			return o
		}
	}
	t.Fatalf("%s's log has no report:\n%s", pod.Name, log)
	return handleAttackOutcome{}
}
