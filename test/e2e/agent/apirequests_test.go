// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestAPIRequestsCounted: a real evictd, once it has synced with the real
// API server, shows in evictd_api_requests_total what its informers asked:
// its node's pods read (a list, or a streaming list where the API server
// serves one, which is a watch) and then watched, each answered 200, as
// the Node and the PriorityClasses; and how long the requests other than
// watches took, in evictd_api_request_duration_seconds.
func TestAPIRequestsCounted(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "apirequests", MemoryBytes: nodeMemory})
	e := startEvictd(t, c, node, "--dry-run")
	m := e.scrape()

	// A missing family fails here; a missing series of it reads 0 below.
	m.Value(t, "evictd_api_requests_total", nil)
	count := func(verb, resource string) float64 {
		v, err := m.Lookup("evictd_api_requests_total", map[string]string{"verb": verb, "resource": resource, "code": "200"})
		if err != nil {
			return 0
		}
		return v
	}
	for _, resource := range []string{"pods", "nodes", "priorityclasses"} {
		reads, watches := count("list", resource), count("watch", resource)
		t.Logf("%s: %v lists, %v watches answered 200", resource, reads, watches)
		// The informer reads the resource once: a list and a watch, or a
		// streaming list (a watch) that goes on as the watch.
		if reads+watches < 1 || watches < 1 {
			t.Errorf("evictd_api_requests_total of %s: %v lists and %v watches answered 200; want its informer's read and watch",
				resource, reads, watches)
		}
	}
	if n, err := m.Lookup("evictd_api_request_duration_seconds", map[string]string{"verb": "watch"}); err == nil {
		t.Errorf("evictd_api_request_duration_seconds has %v watch observations; want no series", n)
	}
	// The agent's other requests, the Events it writes at start among them
	// where it writes any, are timed; at the least its start-up's reads.
	if n := m.Value(t, "evictd_api_request_duration_seconds", nil); n < 1 {
		t.Errorf("evictd_api_request_duration_seconds holds %v observations; want the agent's requests but watches", n)
	}
}
