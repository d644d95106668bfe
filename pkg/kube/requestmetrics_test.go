// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
)

// recorder is a RequestMetrics that keeps what it is told.
type recorder struct {
	mu        sync.Mutex
	requests  map[string]int             // "verb resource code"
	durations map[string][]time.Duration // "verb resource"
}

func newRecorder() *recorder {
	return &recorder{requests: map[string]int{}, durations: map[string][]time.Duration{}}
}

func (r *recorder) APIRequest(verb, resource, code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[verb+" "+resource+" "+code]++
}

func (r *recorder) APIRequestDuration(verb, resource string, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.durations[verb+" "+resource] = append(r.durations[verb+" "+resource], took)
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[key]
}

func TestRequestKind(t *testing.T) {
	for _, tc := range []struct {
		method, url    string
		verb, resource string
	}{
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", "list", "pods"},
		{"GET", "/api/v1/pods?watch=true&sendInitialEvents=true", "watch", "pods"},
		{"GET", "/api/v1/pods?watch=1", "watch", "pods"},
		{"GET", "/api/v1/pods?watch=false", "list", "pods"},
		{"GET", "/api/v1/namespaces/ns/pods/p", "get", "pods"},
		{"POST", "/api/v1/namespaces/ns/pods/p/eviction", "create", "pods/eviction"},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", "delete", "pods"},
		{"DELETE", "/api/v1/namespaces/ns/pods", "deletecollection", "pods"},
		{"PATCH", "/api/v1/nodes/n1", "patch", "nodes"},
		{"PATCH", "/api/v1/nodes/n1/status", "patch", "nodes/status"},
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1", "list", "nodes"},
		// A namespace itself, and its subresources, against a resource in it.
		{"GET", "/api/v1/namespaces", "list", "namespaces"},
		{"GET", "/api/v1/namespaces/ns", "get", "namespaces"},
		{"PUT", "/api/v1/namespaces/ns/finalize", "update", "namespaces/finalize"},
		{"GET", "/api/v1/namespaces/ns/events?watch=true", "watch", "events"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", "create", "events"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/evictd-n1", "update", "leases"},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?fieldSelector=metadata.name%3Devictd-n1&watch=true", "watch", "leases"},
		{"GET", "/apis/scheduling.k8s.io/v1/priorityclasses", "list", "priorityclasses"},
		{"POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "create", "subjectaccessreviews"},
		{"DELETE", "/apis/apps/v1/namespaces/evictd-system/daemonsets/evictd", "delete", "daemonsets"},
		// Outside the resource API.
		{"GET", "/version", "get", ResourceOther},
		{"GET", "/apis/events.k8s.io/v1", "get", ResourceOther},
		{"GET", "/api/v1", "get", ResourceOther},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if verb, resource := requestKind(tc.method, u); verb != tc.verb || resource != tc.resource {
			t.Errorf("%s %s: verb %q resource %q; want %q %q", tc.method, tc.url, verb, resource, tc.verb, tc.resource)
		}
	}
}

// fakeAPIServer answers as an API server would, with the codes the test
// asks for: evictions of "ok" 201, of "blocked" 429; a Lease update 409;
// pods listed and watched (one event, then the watch ends).
func fakeAPIServer(t *testing.T) *httptest.Server {
	t.Helper()
	status := func(w http.ResponseWriter, code int, reason metav1.StatusReason) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "true":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns"}}}`+"\n")
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}`)
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/ns/pods/ok/eviction":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Success","code":201}`)
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/ns/pods/blocked/eviction":
			status(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"):
			status(w, http.StatusConflict, metav1.StatusReasonConflict)
		case r.Method == http.MethodPost && r.URL.Path == "/apis/events.k8s.io/v1/namespaces/ns/events":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"e","namespace":"ns"}}`)
		default:
			status(w, http.StatusNotFound, metav1.StatusReasonNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRequestMetricsCountEveryCall: every call of a Client with
// WithRequestMetrics is counted once by its verb, resource and the code the
// server answered, a watch included; each but the watch has its duration.
func TestRequestMetricsCountEveryCall(t *testing.T) {
	srv := fakeAPIServer(t)
	rec := newRecorder()
	c, err := NewForConfig(&rest.Config{Host: srv.URL}, WithRequestMetrics(rec))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.List(ctx, Pods, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, Pods, metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	<-w.ResultChan()
	w.Stop()
	if err := c.Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ok"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "blocked"}}); !apierrors.IsTooManyRequests(err) {
			t.Fatalf("eviction of blocked: %v; want the server's 429", err)
		}
	}
	if err := c.CreateEvent(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e"}}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: "evictd-n1"}}
	if _, err := c.UpdateLease(ctx, lease); !apierrors.IsConflict(err) {
		t.Fatalf("lease update: %v; want the server's 409", err)
	}
	if _, err := c.PatchNodeStatus(ctx, "n1", types.StrategicMergePatchType, []byte(`{}`)); !apierrors.IsNotFound(err) {
		t.Fatalf("node status patch: %v; want the server's 404", err)
	}

	want := map[string]int{
		"list pods 200":            1,
		"watch pods 200":           1,
		"create pods/eviction 201": 1,
		"create pods/eviction 429": 2,
		"create events 201":        1,
		"update leases 409":        1,
		"patch nodes/status 404":   1,
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k, n := range want {
		if rec.requests[k] != n {
			t.Errorf("%s counted %d times; want %d", k, rec.requests[k], n)
		}
	}
	for k, n := range rec.requests {
		if want[k] == 0 {
			t.Errorf("%s counted %d times; want none", k, n)
		}
	}
	for _, k := range []string{"list pods", "create pods/eviction", "create events", "update leases", "patch nodes/status"} {
		if got, want := len(rec.durations[k]), want[k+" 200"]+want[k+" 201"]+want[k+" 404"]+want[k+" 409"]+want[k+" 429"]; got != want {
			t.Errorf("%s: %d durations; want %d, one per request", k, got, want)
		}
	}
	if d := rec.durations["watch pods"]; len(d) != 0 {
		t.Errorf("the watch has durations %v; want none (a watch lasts until it ends)", d)
	}
}

// TestRequestMetricsNoAnswer: a request the server never answers counts
// with CodeNoAnswer, and its duration is the time it took to fail.
func TestRequestMetricsNoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there any more
	rec := newRecorder()
	c, err := NewForConfig(&rest.Config{Host: srv.URL}, WithRequestMetrics(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Evict(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}); err == nil {
		t.Fatal("an eviction against a closed server succeeded")
	}
	if n := rec.count("create pods/eviction " + CodeNoAnswer); n < 1 {
		t.Errorf("requests %v; want create pods/eviction %s", rec.requests, CodeNoAnswer)
	}
	if len(rec.durations["create pods/eviction"]) != rec.count("create pods/eviction "+CodeNoAnswer) {
		t.Errorf("durations %v for requests %v; want one per request", rec.durations, rec.requests)
	}
}

// TestRequestDurationCoversTheBody: a request's duration runs until its
// answer's body has been read, not only to the first byte: a list whose
// items come 5 s (of the test's clock) after its headers lasts 5 s.
func TestRequestDurationCoversTheBody(t *testing.T) {
	headersSent, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1",`)
		w.(http.Flusher).Flush()
		close(headersSent)
		<-release
		fmt.Fprint(w, `"metadata":{"resourceVersion":"7"},"items":[]}`)
	}))
	defer srv.Close()
	// Before the server's Close (defers run last first), which waits for
	// the handler: a test that fails early must not leave it blocked.
	var unblock sync.Once
	defer unblock.Do(func() { close(release) })
	rec := newRecorder()
	clk := testingclock.NewFakePassiveClock(time.Unix(1700000000, 0))
	c, err := NewForConfig(&rest.Config{Host: srv.URL}, WithRequestMetrics(rec), func(o *clientOptions) { o.clock = clk })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.List(context.Background(), Pods, metav1.ListOptions{})
		done <- err
	}()
	<-headersSent
	// The request is counted once its headers are in; only then does the
	// clock move, and the rest of the body follows.
	for deadline := time.Now().Add(30 * time.Second); rec.count("list pods 200") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the list was not counted within 30 s of its headers")
		}
	}
	clk.SetTime(clk.Now().Add(5 * time.Second))
	unblock.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if d := rec.durations["list pods"]; len(d) != 1 || d[0] != 5*time.Second {
		t.Errorf("list pods durations %v; want [5s], the time to the body's end", d)
	}
}
