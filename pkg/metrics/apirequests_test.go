// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/kube"
)

// TestAPIRequestsThroughTheClient: evictd's API client, given these
// metrics, counts each request in evictd_api_requests_total by verb,
// resource and the code a real HTTP server answered, and times each in
// evictd_api_request_duration_seconds but the watch.
func TestAPIRequestsThroughTheClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "true":
			fmt.Fprint(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns"}}}`+"\n")
		case r.URL.Path == "/api/v1/pods":
			fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}`)
		case r.URL.Path == "/api/v1/namespaces/ns/pods/ok/eviction":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Success","code":201}`)
		default:
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`)
		}
	}))
	defer srv.Close()
	m, err := New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewForConfig(&rest.Config{Host: srv.URL}, kube.WithRequestMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.List(ctx, kube.Pods, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, kube.Pods, metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	<-w.ResultChan()
	w.Stop()
	if err := c.Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ok"}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "blocked"}}); !apierrors.IsTooManyRequests(err) {
			t.Fatalf("eviction of blocked: %v; want the server's 429", err)
		}
	}

	reg := m.Registry()
	for _, tc := range []struct {
		verb, resource, code string
		want                 float64
	}{
		{"list", "pods", "200", 1},
		{"watch", "pods", "200", 1},
		{"create", "pods/eviction", "201", 1},
		{"create", "pods/eviction", "429", 3},
	} {
		labels := map[string]string{"verb": tc.verb, "resource": tc.resource, "code": tc.code}
		if got := metrictest.Value(t, reg, "evictd_api_requests_total", labels); got != tc.want {
			t.Errorf("evictd_api_requests_total%s = %v; want %v", metrictest.Selector(labels), got, tc.want)
		}
	}
	if n := metrictest.Count(t, reg, "evictd_api_request_duration_seconds", map[string]string{"verb": "create", "resource": "pods/eviction"}); n != 4 {
		t.Errorf("evictd_api_request_duration_seconds of create pods/eviction holds %d observations; want 4, one per request", n)
	}
	if n := metrictest.Count(t, reg, "evictd_api_request_duration_seconds", map[string]string{"verb": "list", "resource": "pods"}); n != 1 {
		t.Errorf("evictd_api_request_duration_seconds of list pods holds %d observations; want 1", n)
	}
	metrictest.Absent(t, reg, "evictd_api_request_duration_seconds", map[string]string{"verb": "watch"})
}
