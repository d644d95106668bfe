// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// guardWebhook is the name of the validating webhook that cannot be called.
const guardWebhook = "guard.evictd-e2e.example.com"

// TestFaultEvictionWebhookDown: a ValidatingWebhookConfiguration with
// failurePolicy Fail guards the evictions of one namespace's pods, and its
// backend does not answer (an https URL on a closed loopback port): the API
// server answers their evictions 500 "failed calling webhook". The two
// pods of that namespace rank first. That answer is about the pods the
// webhook selects, not the API server: evictd evicts web, in the other
// namespace, right after the failures (no node-wide back-off),
// says why (a warning naming each pod and the webhook, an
// EvictionWebhookFailed Event on each, evictd_evictions_total
// {result="webhook_failed"}, no result="error"), and the guarded pods
// survive. evictd's debug log shows no back-off or rate-limit hold between
// batch's failure and web's eviction (the same-step property itself is
// checked on a fake clock in pkg/agent's tests). Before, the 500 was an API
// server failure: the episode backed off
// and asked for batch again and again, and nothing was evicted while the
// node sank.
func TestFaultEvictionWebhookDown(t *testing.T) {
	c := framework.Start(t)
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "webhook", MemoryBytes: nodeMemory})
	guarded, free := c.Namespace(t, "guarded"), c.Namespace(t, "free")
	// rank (memory): batch, low (guarded; above request, lowest
	// priorities), web (free; above request), then the hog and db.
	pods := createRunning(t, c.Admin, append(
		podsFor(guarded, node.Name, []podSpec{
			{name: "batch", holdMiB: 80},
			{name: "low", priorityClass: classLow, holdMiB: 80},
		}),
		podsFor(free, node.Name, []podSpec{
			{name: "web", priorityClass: classMid, holdMiB: 250, requests: res("memory", "64Mi")},
			{name: "db", priorityClass: classHigh, holdMiB: 100,
				requests: res("cpu", "100m", "memory", "200Mi"), limits: res("cpu", "100m", "memory", "200Mi")},
		})...)...)
	waitHolding(t, node, mapValues(pods)...)
	avail := startSampler(t, sampleInterval, memoryAvailable(node, nodeMemory))
	time.Sleep(200 * time.Millisecond)
	logBaseline(t, node, avail, mapValues(pods))

	guardNamespace(t, c, guarded, pods["batch"].Name, pods["web"])
	// Debug lines: the back-off and rate-limit holds, which must not come
	// between the failures and the next eviction.
	e := startEvictd(t, c, node, append(memoryFlags, "--act-early=false", "--log-level=debug")...)
	// 64 → 300 MiB at 50 MiB/s: the threshold is crossed on the way, and
	// web's 250 MiB alone bring the node back above threshold + reclaim.
	hog := createRunning(t, c.Admin, hogSpec(50, 300).pod(free, node.Name))["hog"]

	evs := waitEvictions(t, e, 1, evictionTimeout)
	e.waitLog(evictionTimeout, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[len(evs)-1].TS) })
	evs = evicted(e)
	if got, want := podsOf(evs), []string{podKey(pods["web"])}; !slices.Equal(got, want) {
		t.Fatalf("evictd evicted %v, want exactly %v (batch's and low's webhook is down)", got, want)
	}
	failed := e.find("admission webhook failed on this pod's eviction; trying the next candidate")
	if got, want := podsOf(failed), []string{podKey(pods["batch"]), podKey(pods["low"])}; !slices.Equal(got, want) {
		t.Fatalf("webhook failure warnings for %v, want %v, in rank order:\n%s", got, want, rawLines(e.logs()))
	}
	for _, l := range failed {
		if l.Level != "warn" || l.Str("webhook") != guardWebhook || !strings.Contains(l.Raw, "failed calling webhook") {
			t.Errorf("webhook failure line %s: want a warning naming webhook %s and quoting the server", l.Raw, guardWebhook)
		}
	}
	t.Logf("batch's webhook failed at %s, low's %v later; web evicted %v after batch's failure",
		failed[0].TS.Format(time.StampMilli), failed[1].TS.Sub(failed[0].TS), evs[0].TS.Sub(failed[0].TS))
	if held := holdsBetween(t, e.logs(), failed[0], evs[0]); len(held) != 0 {
		t.Errorf("between batch's webhook failure and web's eviction evictd held back (want the next candidate at once):%s", rawLines(held))
	}
	if f := e.find("eviction failed"); len(f) != 0 {
		t.Errorf("a webhook failure logged as an API failure: %s", f[0].Raw)
	}
	mt := e.scrape()
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "webhook_failed"}); got != 2 {
		t.Errorf("evictd_evictions_total{result=webhook_failed} = %v, want 2 (batch and low, once each: their 30s recheck outlasts the episode)", got)
	}
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "evicted"}); got != 1 {
		t.Errorf("evictd_evictions_total{result=evicted} = %v, want 1", got)
	}
	if got := mt.Value(t, "evictd_evictions_total", map[string]string{"result": "error"}); got != 0 {
		t.Errorf("evictd_evictions_total{result=error} = %v, want 0: the API server did not fail", got)
	}
	var events []string
	for _, ev := range evictdEvents(t, c, guarded) {
		if strings.HasPrefix(ev, "EvictionWebhookFailed ") {
			events = append(events, ev)
		}
	}
	slices.Sort(events)
	if len(events) != 2 || !strings.HasPrefix(events[0], "EvictionWebhookFailed Pod/batch: ") || !strings.HasPrefix(events[1], "EvictionWebhookFailed Pod/low: ") {
		t.Errorf("EvictionWebhookFailed Events %q, want one on batch and one on low", events)
	}
	for _, ev := range events {
		if !strings.Contains(ev, `"`+guardWebhook+`"`) {
			t.Errorf("Event %q does not name the webhook %s", ev, guardWebhook)
		}
	}
	for _, name := range []string{"batch", "low", "db"} {
		untouched(t, c.Admin, node, pods[name])
	}
	untouched(t, c.Admin, node, hog)
	if n := node.OOMKills(); n != 0 {
		t.Errorf("the kernel OOM-killed %d processes on the node", n)
	}
}

// guardNamespace registers a validating webhook, failurePolicy Fail, on the
// evictions of ns's pods, whose backend is an https URL on a loopback port
// nobody listens on (with a CA of its own: the API server needs one), and
// returns once it is in force: a server-side dry-run eviction of ns/name
// fails calling it, and one of other (another namespace) is allowed.
func guardNamespace(t *testing.T, c *framework.Cluster, ns, name string, other *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	ports, err := framework.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "guard-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: guardWebhook,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To("https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/validate"),
				CABundle: selfSignedCA(t),
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"},
				},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:     ptr.To(admissionregistrationv1.Fail),
			// None: dry-run evictions call it too, so that the test can see
			// it in force.
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](2),
		}},
	}
	if _, err := c.Admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
	dryRun := func(ns, name string) error {
		return c.Admin.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: name, Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
	}
	// The API server picks the configuration up from its informer.
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = dryRun(ns, name)
		return apierrors.IsInternalError(last) && strings.Contains(last.Error(), `failed calling webhook "`+guardWebhook+`"`), nil
	})
	if err != nil {
		t.Fatalf("the webhook on %s's evictions not failing after 30s: the last dry run of %s/%s answered %v", ns, ns, name, last)
	}
	t.Logf("the API server answers the eviction of %s/%s: %v", ns, name, last)
	if err := dryRun(other.Namespace, other.Name); err != nil {
		t.Fatalf("a dry-run eviction of %s, outside the webhook's namespace: %v", podKey(other), err)
	}
}

// selfSignedCA is the PEM of a throwaway self-signed CA certificate.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "evictd e2e webhook CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(fmt.Errorf("self-signed CA: %w", err))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
