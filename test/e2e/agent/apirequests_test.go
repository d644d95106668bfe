// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net/http"
	"testing"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestAPIRequestsCounted: a real evictd, once it has synced with the real
// API server, shows in evictd_api_requests_total what its informers asked:
// its node's pods, its Node and the PriorityClasses each read and watched,
// answered 200 (where the API server serves streaming lists, as 1.37 does,
// the read is the watch's first events: one watch each, no list). A call
// on its secure port then makes it ask the API server who the caller is
// and whether it may (a TokenReview and a SubjectAccessReview, each a
// create answered 201), which are timed in
// evictd_api_request_duration_seconds, where no watch ever is.
func TestAPIRequestsCounted(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "apirequests", MemoryBytes: nodeMemory})
	e := startEvictd(t, c, node, "--dry-run")
	m := e.scrape()
	// A missing family fails here; a missing series of it reads 0 below.
	m.Value(t, "evictd_api_requests_total", nil)
	count := func(verb, resource, code string) float64 {
		v, err := m.Lookup("evictd_api_requests_total", map[string]string{"verb": verb, "resource": resource, "code": code})
		if err != nil {
			return 0
		}
		return v
	}
	for _, resource := range []string{"pods", "nodes", "priorityclasses"} {
		lists, watches := count("list", resource, "200"), count("watch", resource, "200")
		t.Logf("%s: %v lists, %v watches answered 200", resource, lists, watches)
		if watches < 1 {
			t.Errorf("evictd_api_requests_total of %s: %v lists and %v watches answered 200; want its informer's watch (and its list, or a streaming one)",
				resource, lists, watches)
		}
	}

	addr := e.secureAddress()
	nobody := callerToken(t, c, c.Namespace(t, "callers"), "nobody", "")
	if code, body := secureGet(t, addr, "/explain", nobody); code != http.StatusForbidden {
		t.Fatalf("GET /explain by a caller without the grant: %d, want 403 (asked of the API server):\n%s", code, firstLines(body, 5))
	}
	m = e.scrape()
	for _, resource := range []string{"tokenreviews", "subjectaccessreviews"} {
		if n := count("create", resource, "201"); n < 1 {
			t.Errorf("evictd_api_requests_total of create %s answered 201: %v; want the secure port's question", resource, n)
		}
		if n := m.Value(t, "evictd_api_request_duration_seconds", map[string]string{"verb": "create", "resource": resource}); n < 1 {
			t.Errorf("evictd_api_request_duration_seconds of create %s holds %v observations; want one per question", resource, n)
		}
	}
	if n, err := m.Lookup("evictd_api_request_duration_seconds", map[string]string{"verb": "watch"}); err == nil {
		t.Errorf("evictd_api_request_duration_seconds has %v watch observations; want no series", n)
	}
}
