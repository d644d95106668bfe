// SPDX-License-Identifier: Apache-2.0

//go:build vmnode && vmnodebench

package vmnode

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// podCeiling fills the node of make bench-peers with small pods, so that
// each daemon's cost is read with the node at the kubelet's pod ceiling
// (EVICTD_PEERS_PODS=110, issue 35's section 3), not at a scenario's
// handful: evictd reads every pod's cgroup and keeps every pod in its
// informer, systemd-oomd walks kubepods.slice's children, and the node's
// process count is what earlyoom scans when it kills. The filler pods stay
// from run to run in a namespace of their own, topped up before each.
type podCeiling struct {
	ns   string // the filler pods' namespace; "" when the node is not filled
	pods int    // the pods on the node once the pressure has started
}

// fillerMiB is what each filler pod holds, within its request (last in
// every eviction order, as the host bench's 110 pods are).
const fillerMiB, fillerRequest = 1, 16 << 20

// podCeilingOf reads EVICTD_PEERS_PODS: empty for no filler, or the pods
// the node holds once a scenario's pressure has started, at most the
// kubelet's default maxPods (the node's).
func podCeilingOf(t *testing.T, n *Node, v string, scenarios []peerScenario) podCeiling {
	if v == "" {
		return podCeiling{}
	}
	pods, err := strconv.Atoi(v)
	most := 0
	for _, sc := range scenarios {
		most = max(most, sc.pods+1) // and evictd's pod
	}
	if err != nil || pods < most || pods > 110 {
		t.Fatalf("EVICTD_PEERS_PODS=%q: want a number of pods from %d (the scenarios' own and evictd's) to 110 (the kubelet's maxPods)", v, most)
	}
	// Each pod's shim takes an inotify instance for its OOM events: at
	// Debian's 128 a user, containerd could not watch the last pods' ("failed
	// to create inotify fd: too many open files"), nor evictd take its own.
	// Nodes that run 110 pods raise it, as this does.
	if out, err := n.Sh(context.Background(), "sysctl -w fs.inotify.max_user_instances=8192"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return podCeiling{ns: newNamespace(t, n, "ceiling"), pods: pods}
}

// keep are the namespaces a run leaves alone: the filler's.
func (c podCeiling) keep() []string {
	if c.ns == "" {
		return nil
	}
	return []string{c.ns}
}

// fill tops the filler up, or takes some away, so that the node holds
// c.pods once the scenario's pods have come and evictd's runs (its slot is
// kept whether it runs or not: the configurations without it run one pod
// under the ceiling), and waits until every filler pod runs. A filler pod
// that ended in a run (the run's table names who ended it) is deleted and
// replaced.
func (c podCeiling) fill(t *testing.T, ctx context.Context, n *Node, scenarioPods int) {
	t.Helper()
	if c.ns == "" {
		return
	}
	room := scenarioPods + 1
	core := n.Cluster.Admin.CoreV1()
	onNode, err := core.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	var fillers []string
	for _, p := range onNode.Items {
		done := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if p.Namespace == c.ns && (done || p.DeletionTimestamp != nil) {
			if err := core.Pods(c.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if done || p.Namespace == "evictd-system" {
			continue
		}
		active++
		if p.Namespace == c.ns {
			fillers = append(fillers, p.Name)
		}
	}
	want := c.pods - room - active
	switch {
	case want < 0 && -want > len(fillers):
		t.Fatalf("%d pods on the node besides evictd's, %d of them filler: no room for the scenario's %d and evictd's under %d", active, len(fillers), scenarioPods, c.pods)
	case want < 0:
		for _, name := range fillers[:-want] {
			if err := core.Pods(c.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	began := time.Now()
	for made := 0; made < want; {
		// In batches: a hundred containers asked for at once under TCG
		// timed out in containerd and were asked again, over and over (9
		// running after 11 minutes).
		for range min(fillBatch, want-made) {
			p := workloadPod(c.ns, "", fillerRequest, 0, "--hold-mib="+strconv.Itoa(fillerMiB))
			p.Name, p.GenerateName, p.Labels = "", "filler-", map[string]string{"app": "filler"}
			if _, err := core.Pods(c.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			made++
		}
		c.waitRunning(t, ctx, n, len(fillers)+made)
	}
	if want < 0 {
		c.waitRunning(t, ctx, n, len(fillers)+want)
	}
	if want != 0 {
		t.Logf("the filler: %d pods running (%+d) in %s; %d on the node besides evictd's, the scenario's %d to come",
			len(fillers)+want, want, time.Since(began).Round(time.Second), active+want, scenarioPods)
	}
}

// fillBatch is how many filler pods are asked for at once.
const fillBatch = 8

// waitRunning waits until the filler is exactly pods pods, all running.
func (c podCeiling) waitRunning(t *testing.T, ctx context.Context, n *Node, pods int) {
	t.Helper()
	if err := n.poll(ctx, 10*time.Minute, "the filler pods running", func(ctx context.Context) error {
		list, err := n.Cluster.Admin.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running != pods || len(list.Items) != pods {
			return fmt.Errorf("%d of %d running (%d pods in all)", running, pods, len(list.Items))
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, n.Diagnostics())
	}
}
