// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/test/e2e/framework"
)

// TestRunbookEvictedEvents runs docs/runbook.md's commands that list
// evictd's evictions (kubectl get events ... reason=Evicted), as written,
// with the real kubectl against the test API server holding two Evicted
// Events: one written by evictd's own Event writer (pkg/evict) as evictd's
// ServiceAccount, one as the kubelet writes its evictions (core/v1, from
// client-go's recorder: source and reporting component kubelet). Each
// command must list evictd's eviction and not the kubelet's; the same
// query by reason alone lists both, so the kubelet's Event is one it would
// have shown.
func TestRunbookEvictedEvents(t *testing.T) {
	kubectl := framework.RequireBinary(t, "kubectl")
	var cmds []string
	for _, c := range commandsIn(readFile(t, "docs/runbook.md")) {
		if strings.HasPrefix(c, "kubectl get events ") && strings.Contains(c, "reason=Evicted") && !slices.Contains(cmds, c) {
			cmds = append(cmds, c)
		}
	}
	if len(cmds) == 0 {
		t.Fatal("docs/runbook.md shows no kubectl get events command for reason=Evicted")
	}

	c := framework.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, err := c.CreateNamespace(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	const byEvictd, byKubelet = "web-evicted-by-evictd", "web-evicted-by-kubelet"
	w := evict.NewEventWriter(c.EvictdAPI, "evictd-system/evictd/node-linux", nil, nil)
	w.Emit(corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: byEvictd, UID: "uid-evictd"},
		corev1.EventTypeWarning, evict.ReasonEvicted, "Evict", "Evicted by evictd: memory.available<300Mi met; grace period 30s.")
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	kubeletEvent := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: byKubelet + ".1", Namespace: ns},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: byKubelet, UID: "uid-kubelet"},
		Reason:              "Evicted",
		Message:             "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92160Ki.",
		Source:              corev1.EventSource{Component: "kubelet", Host: "node-linux"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                corev1.EventTypeWarning,
		ReportingController: "kubelet",
		ReportingInstance:   "node-linux",
	}
	if _, err := c.Admin.CoreV1().Events(ns).Create(ctx, kubeletEvent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// evictd's Event is there (its writer drops a refused one, and logs it).
	if evs, err := c.Admin.EventsV1().Events(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	} else if !slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool { return e.Regarding.Name == byEvictd }) {
		t.Fatalf("evictd's Evicted Event was not written: %d Events in %s", len(evs.Items), ns)
	}

	home := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"), "KUBECONFIG="+c.AdminKubeconfig,
		"HOME="+home, "XDG_CACHE_HOME="+home+"/cache", "XDG_CONFIG_HOME="+home+"/config")
	run := func(cmd string) string {
		t.Helper()
		x := exec.CommandContext(ctx, "bash", "-c", cmd)
		x.Dir, x.Env = repoPath(t), env
		out, err := x.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	if out := run("kubectl get events -A --field-selector reason=Evicted"); !strings.Contains(out, byEvictd) || !strings.Contains(out, byKubelet) {
		t.Fatalf("by reason alone, kubectl lists:\n%s\nwant both evictions, evictd's and the kubelet's", out)
	}
	for _, cmd := range cmds {
		out := run(cmd)
		if !strings.Contains(out, byEvictd) || strings.Contains(out, byKubelet) {
			t.Errorf("%s lists:\n%s\nwant evictd's eviction (%s) and not the kubelet's (%s)", cmd, out, byEvictd, byKubelet)
		}
		t.Logf("%s:\n%s", cmd, out)
	}
}
