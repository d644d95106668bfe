// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
)

// The API server names, in every answer, the FlowSchema and the priority
// level API Priority and Fairness put the request in.
const (
	headerFlowSchemaUID    = "X-Kubernetes-PF-FlowSchema-UID"
	headerPriorityLevelUID = "X-Kubernetes-PF-PriorityLevel-UID"
)

// classification is where the API server put one request.
type classification struct {
	code                      int
	flowSchema, priorityLevel types.UID
}

// classify sends GET path with cfg's identity and reads the answer's
// classification headers.
func classify(t *testing.T, cfg *rest.Config, path string) classification {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return classification{code: resp.StatusCode,
		flowSchema:    types.UID(resp.Header.Get(headerFlowSchemaUID)),
		priorityLevel: types.UID(resp.Header.Get(headerPriorityLevelUID))}
}

// tokenFor is a rest.Config with a token of the ServiceAccount ns/name.
func tokenFor(t *testing.T, c *framework.Cluster, ns, name string) *rest.Config {
	t.Helper()
	tr, err := c.Admin.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	cfg := rest.CopyConfig(c.EvictdConfig)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// TestFlowSchemaClassifiesEvictd: on an API server with API Priority and
// Fairness on, the manifest's FlowSchema, applied as a cluster installed
// from it has it, takes in evictd's requests: a list of a node's pods
// with the agents' token, and a list of Nodes with evictd cleanup's, are
// answered in the FlowSchema evictd and its priority level evictd (the
// answer's X-Kubernetes-PF-* headers carry their UIDs). Another
// ServiceAccount of the same namespace stays in the built-in
// service-accounts schema, where evictd's requests would be without it.
func TestFlowSchemaClassifiesEvictd(t *testing.T) {
	c := framework.Start(t, framework.WithPriorityAndFairness())
	ctx := context.Background()
	fs, err := c.Admin.FlowcontrolV1().FlowSchemas().Get(ctx, "evictd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the manifest's FlowSchema: %v", err)
	}
	pl, err := c.Admin.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "evictd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the manifest's PriorityLevelConfiguration: %v", err)
	}
	// The built-in schemas by UID, to name where a request went instead.
	names := func() map[types.UID]string {
		out := map[types.UID]string{}
		list, err := c.Admin.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range list.Items {
			out[f.UID] = f.Name
		}
		return out
	}
	ns := c.EvictdServiceAccount.Namespace
	bystander := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns}}
	if _, err := c.Admin.CoreV1().ServiceAccounts(ns).Create(ctx, bystander, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who, path string
		cfg       *rest.Config
	}{
		{"the agents' ServiceAccount " + c.EvictdServiceAccount.String(), "/api/v1/pods?fieldSelector=spec.nodeName%3Dflowcontrol&limit=1", c.EvictdConfig},
		{"evictd cleanup's ServiceAccount " + ns + "/evictd-cleanup", "/api/v1/nodes?limit=1", tokenFor(t, c, ns, "evictd-cleanup")},
	} {
		// The API server's flow control reads FlowSchemas through an
		// informer: the schema applied at start is in force a moment later.
		var last classification
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			last = classify(t, tc.cfg, tc.path)
			return last.flowSchema == fs.UID, nil
		})
		if err != nil {
			t.Errorf("GET %s as %s: answered %d in FlowSchema %q (%s); want evictd's, %s", tc.path, tc.who, last.code,
				last.flowSchema, names()[last.flowSchema], fs.UID)
			continue
		}
		if last.code != http.StatusOK {
			t.Errorf("GET %s as %s: %d; want 200 (the shipped RBAC grants it)", tc.path, tc.who, last.code)
		}
		if last.priorityLevel != pl.UID {
			t.Errorf("GET %s as %s: priority level %q; want evictd's, %s", tc.path, tc.who, last.priorityLevel, pl.UID)
		}
		t.Logf("GET %s as %s: FlowSchema evictd, priority level evictd", tc.path, tc.who)
	}

	got := classify(t, tokenFor(t, c, ns, "bystander"), "/version")
	if got.flowSchema == fs.UID || got.priorityLevel == pl.UID {
		t.Errorf("GET /version as %s/bystander went to evictd's FlowSchema or priority level (%+v); want evictd's alone there", ns, got)
	}
	if name := names()[got.flowSchema]; name != "service-accounts" {
		t.Errorf("GET /version as %s/bystander: FlowSchema %q (%s); want the built-in service-accounts", ns, got.flowSchema, name)
	}

	// The API server holds the schema valid: its priority level exists.
	fs, err = c.Admin.FlowcontrolV1().FlowSchemas().Get(ctx, "evictd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range fs.Status.Conditions {
		if cond.Type == "Dangling" && cond.Status != "False" {
			t.Errorf("FlowSchema evictd is dangling: %s", fmt.Sprint(cond))
		}
	}
}
