// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestFaultEvictionRefused: a ValidatingAdmissionPolicy denies the eviction
// of the top-ranked pod (batch), as an operator's policy or a webhook
// guarding a pod would. That answer is about batch, not about the API
// server: evictd evicts the next pods (web, then the hog) at once, says why
// (a warning naming batch and the policy's words, an EvictionRefused Event
// on batch, evictd_evictions_total{result="refused"}), asks about batch
// once (its recheck is 2 minutes, for the node, not the episode: the hog's
// growth makes a second episode, which does not ask again), and batch
// survives. The refused call gives its rate-limit token back, so web goes
// in the same step, not after a token's refill: evictd's debug log shows no
// back-off or rate-limit hold between the refusal and web's eviction (the
// same-step property itself is checked on a fake clock in pkg/agent's
// tests). Before, the refusal was a failure: the episode backed off and
// asked for batch again and again while the node sank.
func TestFaultEvictionRefused(t *testing.T) {
	m := newMemoryNode(t, "refused")
	denyEviction(t, m.c, m.ns, "batch")
	// Debug lines: the back-off and rate-limit holds, which must not come
	// between the refusal and the next eviction.
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--act-early=false", "--log-level=debug")...)
	_, hog := m.startHog(t, hogSpec(50, 600))

	want := []string{podKey(m.pods["web"]), podKey(hog)}
	evs := waitEvictions(t, e, len(want), evictionTimeout)
	e.waitLog(evictionTimeout, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[len(evs)-1].TS) })
	evs = evicted(e)
	if got := podsOf(evs); !slices.Equal(got, want) {
		t.Fatalf("evictd evicted %v, want exactly %v in that order (batch's eviction is denied)", got, want)
	}
	refused := e.find("eviction refused for this pod; trying the next candidate")
	if len(refused) != 1 || refused[0].Pod != podKey(m.pods["batch"]) {
		t.Fatalf("refusal warnings %v, want one naming %s:\n%s", podsOf(refused), podKey(m.pods["batch"]), rawLines(e.logs()))
	}
	if r := refused[0]; !strings.Contains(r.Raw, "batch is protected by policy") || r.Level != "warn" {
		t.Errorf("refusal line %s: want a warning with the policy's words", r.Raw)
	}
	t.Logf("web evicted %v after batch's refusal (evictd's clock)", evs[0].TS.Sub(refused[0].TS))
	if held := holdsBetween(t, e.logs(), refused[0], evs[0]); len(held) != 0 {
		t.Errorf("between batch's refusal and web's eviction evictd held back (want the next candidate at once):%s", rawLines(held))
	}
	if f := e.find("eviction failed"); len(f) != 0 {
		t.Errorf("a refusal logged as a failure: %s", f[0].Raw)
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "refused"}); got != 1 {
		t.Errorf("evictd_evictions_total{result=refused} = %v, want 1 (batch, asked once: its 2-minute recheck outlasts the test)", got)
	}
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "evicted"}); got != 2 {
		t.Errorf("evictd_evictions_total{result=evicted} = %v, want 2", got)
	}
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "error"}); got != 0 {
		t.Errorf("evictd_evictions_total{result=error} = %v, want 0", got)
	}
	var events []string
	for _, ev := range evictdEvents(t, m.c, m.ns) {
		if strings.HasPrefix(ev, "EvictionRefused ") {
			events = append(events, ev)
		}
	}
	if len(events) != 1 || !strings.Contains(events[0], "Pod/batch:") || !strings.Contains(events[0], "batch is protected by policy") {
		t.Errorf("EvictionRefused Events %q, want one on batch quoting the policy", events)
	}
	untouched(t, m.c.Admin, m.node, m.pods["batch"])
	untouched(t, m.c.Admin, m.node, m.pods["db"])
	if n := m.node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes on the node", n)
	}
}

// denyEviction makes the API server deny every eviction of the pod ns/name
// with a ValidatingAdmissionPolicy (GA; no webhook server needed), and
// returns once the policy is in force: a server-side dry-run eviction of
// the pod is refused.
func denyEviction(t *testing.T, c *framework.Cluster, ns, name string) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-eviction-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				// request.name is the pod's for its eviction subresource.
				Expression: "!(request.namespace == '" + ns + "' && request.name == '" + name + "')",
				Message:    name + " is protected by policy",
				// 403; left out, a policy answers 422 (Invalid), which
				// evictd refuses alike (pkg/evict's tests).
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	if _, err := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server compiles the policy from its informer a moment later.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = c.Admin.PolicyV1().Evictions(ns).Evict(context.Background(), &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: name, Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "protected by policy"), nil
	})
	if err != nil && last != nil {
		err = fmt.Errorf("%w; the last dry run answered: %v", err, last)
	} else if err != nil {
		err = fmt.Errorf("%w; the last dry run was allowed", err)
	}
	if err != nil {
		t.Fatalf("the policy denying %s/%s's eviction not in force after 30s: %v", ns, name, err)
	}
}

// holdsBetween returns evictd's lines, from its debug log, that say it held
// an eviction back (a failure's back-off, a retry, the rate limit) and that
// come after from and before to in the log. Log order, not timestamps: the
// lines of one pass may share a millisecond. It fails the test if the log
// has no debug lines at all (evictd not started with --log-level=debug:
// the check would pass for want of the lines it looks for) or if from does
// not come before to.
func holdsBetween(t *testing.T, logs []logEntry, from, to logEntry) []logEntry {
	t.Helper()
	if !slices.ContainsFunc(logs, func(l logEntry) bool { return l.Level == "debug" }) {
		t.Fatal("evictd's log has no debug lines: start it with --log-level=debug to see its back-off and rate-limit holds")
	}
	i := slices.IndexFunc(logs, func(l logEntry) bool { return l.Raw == from.Raw })
	j := slices.IndexFunc(logs, func(l logEntry) bool { return l.Raw == to.Raw })
	if i < 0 || j < 0 || j < i {
		t.Fatalf("evictd logged %q (line %d) and then %q (line %d), want them in that order", from.Msg, i, to.Msg, j)
	}
	var held []logEntry
	for _, l := range logs[i+1 : j] {
		switch {
		case l.Msg == "pausing evictions after a failure",
			l.Msg == "eviction call failed, retrying",
			l.Msg == "eviction held back by rate limit",
			l.Msg == "eviction failed",
			l.Msg == "eviction deferred" && (l.Reason == "rate limited" || l.Reason == "backing off after a failed eviction"):
			held = append(held, l)
		}
	}
	return held
}
