// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

const evictdUser = "system:serviceaccount:evictd-system:evictd"

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// auditLine is one audit event as the API server writes it, with the
// fields ParseAuditRequests reads (and a few it does not).
type auditLine struct {
	id, stage, verb, user, node, resource, subresource, group, ns, uri string
	code                                                               int
	received, ended                                                    float64
}

func (l auditLine) String() string {
	ev := map[string]any{
		"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
		"auditID": l.id, "stage": l.stage, "verb": l.verb, "requestURI": l.uri,
		"userAgent":                "evictd/v0.2.0",
		"requestReceivedTimestamp": at(l.received).Format(time.RFC3339Nano),
		"stageTimestamp":           at(l.ended).Format(time.RFC3339Nano),
	}
	user := map[string]any{"username": l.user, "groups": []string{"system:authenticated"}}
	if l.node != "" {
		user["extra"] = map[string][]string{
			"authentication.kubernetes.io/node-name":     {l.node},
			"authentication.kubernetes.io/pod-name":      {"evictd-" + l.node},
			"authentication.kubernetes.io/credential-id": {"JTI=1"},
		}
	}
	ev["user"] = user
	if l.resource != "" {
		ev["objectRef"] = map[string]any{"resource": l.resource, "subresource": l.subresource, "apiGroup": l.group,
			"namespace": l.ns, "apiVersion": "v1"}
	}
	if l.code != 0 {
		ev["responseStatus"] = map[string]any{"metadata": map[string]any{}, "code": l.code}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func joinLines(ls ...auditLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.String() + "\n")
	}
	return b.String()
}

func TestParseAuditRequests(t *testing.T) {
	lease := auditLine{id: "a1", stage: "ResponseComplete", verb: "update", user: evictdUser, node: "n1",
		resource: "leases", group: "coordination.k8s.io", ns: "kube-node-lease", code: 200, received: 1, ended: 1.01,
		uri: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/evictd-n1"}
	received := lease
	received.stage, received.id = "RequestReceived", "a0"
	watchStart := auditLine{id: "w1", stage: "ResponseStarted", verb: "watch", user: "system:node:n2",
		resource: "pods", code: 200, received: 2, ended: 2.01, uri: "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2&watch=true"}
	watchEnd := watchStart
	watchEnd.stage, watchEnd.ended = "ResponseComplete", 30
	open := auditLine{id: "w2", stage: "ResponseStarted", verb: "watch", user: evictdUser, node: "n1",
		resource: "leases", group: "coordination.k8s.io", ns: "kube-node-lease", code: 200, received: 3, ended: 3,
		uri: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?fieldSelector=metadata.name%3Devictd-n1&timeoutSeconds=300&watch=true"}
	status := auditLine{id: "s1", stage: "ResponseComplete", verb: "patch", user: evictdUser, node: "n1",
		resource: "nodes", subresource: "status", code: 403, received: 4, ended: 4.1}
	readyz := auditLine{id: "r1", stage: "ResponseComplete", verb: "get", user: "admin", uri: "/readyz?verbose",
		code: 200, received: 5, ended: 5}
	panicked := auditLine{id: "p1", stage: "Panic", verb: "list", user: "admin", resource: "pods", ns: "default", received: 6, ended: 6.5,
		uri: "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29"}

	got, err := ParseAuditRequests(strings.NewReader(joinLines(received, lease, watchStart, open, status, watchEnd, readyz, panicked) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []AuditRequest{
		{ID: "a1", User: evictdUser, Node: "n1", Verb: "update", Resource: "leases.coordination.k8s.io", Code: 200, Received: at(1), Ended: at(1.01)},
		{ID: "w1", User: "system:node:n2", Node: "n2", Verb: "watch", Resource: "pods", Scope: "fieldSelector spec.nodeName=NODE",
			Code: 200, Received: at(2), Ended: at(30)},
		{ID: "w2", User: evictdUser, Node: "n1", Verb: "watch", Resource: "leases.coordination.k8s.io",
			Scope: "in kube-node-lease, fieldSelector metadata.name=evictd-NODE", Code: 200, Received: at(3)},
		{ID: "s1", User: evictdUser, Node: "n1", Verb: "patch", Resource: "nodes/status", Code: 403, Received: at(4), Ended: at(4.1)},
		{ID: "r1", User: "admin", Verb: "get", Resource: "/readyz", Code: 200, Received: at(5), Ended: at(5)},
		{ID: "p1", User: "admin", Verb: "list", Resource: "pods", Scope: "in default, labelSelector app=web,tier in (a,b)",
			Code: 500, Received: at(6), Ended: at(6.5)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}

	for _, tc := range []struct{ name, in, wantErr string }{
		{"not JSON names the line", lease.String() + "\n{oops\n", "audit log line 2"},
		{"not an audit event", `{"kind":"Status"}` + "\n", "audit log line 1: not an audit event"},
		{"bad timestamp", strings.Replace(lease.String(), "2026-11-28T12:00:01Z", "yesterday", 1), "requestReceivedTimestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAuditRequests(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// Lines of a real scale run's audit log: an agent's Lease renewal, its pod
// watch (cut off by the API server's stop: no end logged), a kubelet
// heartbeat and an agent's eviction of its node's hog.
func TestParseAuditRequestsReal(t *testing.T) {
	f, err := os.Open("testdata/audit-requests.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseAuditRequests(f)
	if err != nil {
		t.Fatal(err)
	}
	ts := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := []AuditRequest{
		{ID: "d153a3d6-9fae-4a4a-99f7-55373e2f77b0", User: evictdUser, Node: "scale-002", Verb: "update",
			Resource: "leases.coordination.k8s.io", Code: 200,
			Received: ts("2026-11-28T12:18:44.912200Z"), Ended: ts("2026-11-28T12:18:44.917980Z")},
		{ID: "313b4a19-1267-42f6-b589-4be5022e1a4e", User: evictdUser, Node: "scale-001", Verb: "watch", Resource: "pods",
			Scope: "fieldSelector spec.nodeName=NODE", Code: 200, Received: ts("2026-11-28T12:18:44.771533Z")},
		{ID: "7b6ff8e0-9b83-48a0-834b-055b1594bc0c", User: "system:node:scale-000", Node: "scale-000", Verb: "update",
			Resource: "leases.coordination.k8s.io", Code: 200,
			Received: ts("2026-11-28T12:18:36.168031Z"), Ended: ts("2026-11-28T12:18:36.171457Z")},
		{ID: "1b38c770-838c-4e53-ba16-a3c07b804b86", User: evictdUser, Node: "scale-001", Verb: "create", Resource: "pods/eviction",
			Code: 201, Received: ts("2026-11-28T12:19:07.495686Z"), Ended: ts("2026-11-28T12:19:07.591339Z")},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	s := Senders{Evictd: evictdUser}
	if s.Of(got[0]) != SenderEvictd || s.Of(got[2]) != SenderKubelet {
		t.Errorf("senders: %s, %s; want evictd, kubelet", s.Of(got[0]), s.Of(got[2]))
	}
}

func TestSendersOf(t *testing.T) {
	s := Senders{Evictd: evictdUser}
	for user, want := range map[string]string{
		evictdUser:      SenderEvictd,
		"system:node:a": SenderKubelet,
		"admin":         SenderOther,
		"system:serviceaccount:evictd-system:evictd-cleanup": SenderOther,
		"system:apiserver": SenderOther,
	} {
		if got := s.Of(AuditRequest{User: user}); got != want {
			t.Errorf("Of(%q) = %s, want %s", user, got, want)
		}
	}
	if got := (Senders{}).Of(AuditRequest{User: ""}); got != SenderOther {
		t.Errorf("no evictd user: Of(\"\") = %s, want other", got)
	}
}

// requests builds AuditRequests: (sender user, node, verb, resource, code,
// received, ended; ended < 0 for none).
func req(user, node, verb, resource string, code int, received, ended float64) AuditRequest {
	r := AuditRequest{User: user, Node: node, Verb: verb, Resource: resource, Code: code, Received: at(received)}
	if ended >= 0 {
		r.Ended = at(ended)
	}
	return r
}

func TestCountRequestsAndRates(t *testing.T) {
	s := Senders{Evictd: evictdUser}
	reqs := []AuditRequest{
		req(evictdUser, "n1", "update", "leases", 200, 9.999, 10), // before the window
		req(evictdUser, "n1", "update", "leases", 200, 10, 10),    // at its start: in
		req(evictdUser, "n1", "update", "leases", 409, 12, 12),
		req(evictdUser, "n2", "get", "leases", 200, 13, 13),
		req(evictdUser, "n2", "watch", "pods", 200, 14, -1),
		req("system:node:n1", "n1", "update", "leases", 200, 15, 15),
		req("admin", "", "create", "pods", 201, 16, 16),
		req(evictdUser, "n1", "update", "leases", 200, 20, 20), // at its end: out
	}
	w := Window{Start: at(10), End: at(20)}
	counts := CountRequests(reqs, w, s)
	want := map[RequestKey]int{
		{SenderEvictd, "update", "leases", ""}:  2,
		{SenderEvictd, "get", "leases", ""}:     1,
		{SenderEvictd, "watch", "pods", ""}:     1,
		{SenderKubelet, "update", "leases", ""}: 1,
		{SenderOther, "create", "pods", ""}:     1,
	}
	if len(counts) != len(want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%+v: %d, want %d", k, counts[k], v)
		}
	}
	all, writes := SenderTotals(counts)
	if all[SenderEvictd] != 4 || writes[SenderEvictd] != 2 || writes[SenderKubelet] != 1 || writes[SenderOther] != 1 {
		t.Errorf("totals: all %v, writes %v", all, writes)
	}
	rates := NodeRates(reqs, w, s, SenderEvictd, []string{"n1", "n2", "n3"}, WriteRequest)
	if want := []float64{0.2, 0, 0}; !floatsEqual(rates, want) {
		t.Errorf("evictd write rates per node = %v, want %v", rates, want)
	}
	if rates := NodeRates(reqs, w, s, SenderEvictd, []string{"n2"}, nil); !floatsEqual(rates, []float64{0.2}) {
		t.Errorf("n2's request rate = %v, want 0.2", rates)
	}
	codes := CountCodes(reqs, w, s)
	if c := codes[RequestKey{SenderEvictd, "update", "leases", ""}]; c[200] != 1 || c[409] != 1 || len(c) != 2 {
		t.Errorf("lease update answers = %v, want 200 ×1, 409 ×1", c)
	}
	if PerSecond(5, Window{}) != 0 {
		t.Error("an empty window has no rate")
	}
}

func floatsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-9 || d < -1e-9 {
			return false
		}
	}
	return true
}

func TestOpenWatches(t *testing.T) {
	s := Senders{Evictd: evictdUser}
	reqs := []AuditRequest{
		req(evictdUser, "n1", "watch", "pods", 200, 1, -1),         // open until the cut at 50
		req(evictdUser, "n1", "watch", "nodes", 200, 1, 20),        // ended at 20
		req(evictdUser, "n1", "watch", "leases", 200, 60, -1),      // made after the cut, still open
		req("system:node:n1", "n1", "watch", "pods", 200, 2, 1000), // open throughout
		req(evictdUser, "n1", "list", "pods", 200, 1, -1),          // not a watch
	}
	cuts := []time.Time{at(50)}
	for _, tc := range []struct {
		at   float64
		want map[RequestKey]int
	}{
		{10, map[RequestKey]int{{SenderEvictd, "watch", "pods", ""}: 1, {SenderEvictd, "watch", "nodes", ""}: 1, {SenderKubelet, "watch", "pods", ""}: 1}},
		{30, map[RequestKey]int{{SenderEvictd, "watch", "pods", ""}: 1, {SenderKubelet, "watch", "pods", ""}: 1}},
		{55, map[RequestKey]int{{SenderKubelet, "watch", "pods", ""}: 1}},
		{70, map[RequestKey]int{{SenderEvictd, "watch", "leases", ""}: 1, {SenderKubelet, "watch", "pods", ""}: 1}},
	} {
		got := OpenWatches(reqs, at(tc.at), cuts, s)
		if len(got) != len(tc.want) {
			t.Errorf("at %v s: %v, want %v", tc.at, got, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("at %v s: %+v = %d, want %d", tc.at, k, got[k], v)
			}
		}
	}
}

func TestHerdAfter(t *testing.T) {
	s := Senders{Evictd: evictdUser}
	reqs := []AuditRequest{
		req(evictdUser, "n1", "update", "leases", 200, 99, 99), // before the restart
		req(evictdUser, "n1", "get", "leases", 200, 100.5, 100.5),
		req(evictdUser, "n1", "update", "leases", 200, 100.6, 100.6),
		req(evictdUser, "n2", "update", "leases", 503, 101.2, 101.2), // refused: not an accepted write
		req(evictdUser, "n2", "list", "pods", 200, 101.3, 101.3),
		req(evictdUser, "n2", "list", "nodes", 200, 101.9, 101.9),
		req(evictdUser, "n2", "update", "leases", 200, 112, 112),
		req("system:node:n1", "n1", "update", "leases", 200, 101, 101),
	}
	h := HerdAfter(reqs, Window{Start: at(100), End: at(200)}, s, SenderEvictd, []string{"n1", "n2", "n3"})
	if h.Requests != 6 || h.First10s != 5 {
		t.Errorf("requests %d, first 10 s %d; want 6 and 5", h.Requests, h.First10s)
	}
	if h.Peak != 3 || h.At != time.Second {
		t.Errorf("peak %d at %s, want 3 in the second from 1 s", h.Peak, h.At)
	}
	wantFirst := Spread{Of: 3, N: 2, First: 500 * time.Millisecond, Median: 500 * time.Millisecond, Last: 1200 * time.Millisecond}
	if h.FirstRequest != wantFirst {
		t.Errorf("first requests %+v, want %+v", h.FirstRequest, wantFirst)
	}
	wantWrite := Spread{Of: 3, N: 2, First: 600 * time.Millisecond, Median: 600 * time.Millisecond, Last: 12 * time.Second}
	if h.FirstWrite != wantWrite {
		t.Errorf("first writes %+v, want %+v", h.FirstWrite, wantWrite)
	}
	if got := h.FirstWrite.String(); got != "2/3: 0.6 s, 0.6 s, 12.0 s" {
		t.Errorf("String() = %q", got)
	}
	if got := (Spread{Of: 3}).String(); got != "0/3" {
		t.Errorf("an empty spread reads %q, want 0/3", got)
	}
}

const apiMetrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 1000
apiserver_request_total{code="409",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 20
# HELP etcd_requests_total [ALPHA] Etcd request counts for each operation and object type.
# TYPE etcd_requests_total counter
etcd_requests_total{group="coordination.k8s.io",operation="update",resource="leases"} 100
etcd_requests_total{group="",operation="get",resource="pods"} 7
etcd_requests_total{group="",operation="update",resource="nodes"} 3
# HELP apiserver_registered_watchers [ALPHA] Number of currently registered watchers for a given resources
# TYPE apiserver_registered_watchers gauge
apiserver_registered_watchers{group="",kind="Pod",version="v1"} 12
apiserver_registered_watchers{group="",kind="Node",version="v1"} 3
# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 11
apiserver_longrunning_requests{component="apiserver",group="",resource="nodes",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="exec",verb="CONNECT",version="v1"} 1
# HELP apiserver_watch_events_total [ALPHA] Number of events sent in watch clients
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",kind="Pod",version="v1"} 50
`

func mustScrape(t *testing.T, text string) Scrape {
	t.Helper()
	s, err := ParseScrape(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCounterDelta(t *testing.T) {
	before := mustScrape(t, apiMetrics)
	after := mustScrape(t, strings.NewReplacer(`resource="leases"} 100`, `resource="leases"} 160`,
		`resource="nodes"} 3`, `resource="nodes"} 1`).Replace(apiMetrics))
	d, err := CounterDelta(before, after, "etcd_requests_total", nil, "operation")
	if err != nil {
		t.Fatal(err)
	}
	// update: leases 60 more; nodes went from 3 to 1, a reset, so 1 since.
	if d["update"] != 61 || d["get"] != 0 || len(d) != 2 {
		t.Errorf("delta by operation = %v, want update 61, get 0", d)
	}
	fresh, err := CounterDelta(nil, after, "etcd_requests_total", map[string]string{"resource": "leases"}, "")
	if err != nil || fresh[""] != 160 {
		t.Errorf("from a process started in the span: %v, %v; want 160", fresh, err)
	}
	if _, err := CounterDelta(before, after, "etcd_request_total", nil, ""); !errors.Is(err, errNoFamily) {
		t.Errorf("a missing family: err = %v, want errNoFamily", err)
	}
	if v, err := after.Sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH"}); err != nil || v != 14 {
		t.Errorf("watches in flight = %v, %v; want 14", v, err)
	}
	if v, err := after.Sum("apiserver_registered_watchers", nil); err != nil || v != 15 {
		t.Errorf("registered watchers = %v, %v; want 15", v, err)
	}
	hist := mustScrape(t, "# TYPE x histogram\nx_bucket{le=\"+Inf\"} 1\nx_sum 1\nx_count 1\n")
	if _, err := hist.Sum("x", nil); err == nil || !strings.Contains(err.Error(), "not a counter or gauge") {
		t.Errorf("a histogram: err = %v", err)
	}
	if _, err := ParseScrape(strings.NewReader("x{ 1\n")); err == nil {
		t.Error("a broken exposition parsed")
	}
}

func TestDistributeRateGrouped(t *testing.T) {
	if d := Distribute([]float64{5, 1, 3, 4}); d != (Distribution{Median: 3.5, Min: 1, Max: 5}) {
		t.Errorf("Distribute = %+v", d)
	}
	if d := Distribute(nil); d != (Distribution{}) {
		t.Errorf("Distribute(nil) = %+v", d)
	}
	if got := Distribute([]float64{5, 4.9, 5.1}).String(); got != "5.00 (4.90–5.10)" {
		t.Errorf("String = %q", got)
	}
	for x, want := range map[float64]string{0: "0", 0.0001: "1.0e-04", 0.005: "0.0050", 0.1: "0.100", 5: "5.00", 250.4: "250", -2: "-2.00",
		99.999: "100", 0.099996: "0.100", 4.958: "4.96", 4958.4: "4958"} {
		if got := Rate(x); got != want {
			t.Errorf("Rate(%v) = %q, want %q", x, got, want)
		}
	}
	w := Window{Start: at(0), End: at(10)}
	if got := Grouped(map[string]float64{"update": 50, "get": 1, "list": 1, "": 0.001, "delete": 10}, w); got != "update 5.00, delete 1.00, get 0.100, list 0.100" {
		t.Errorf("Grouped = %q", got)
	}
	if got := Grouped(nil, w); got != "-" {
		t.Errorf("Grouped(nil) = %q", got)
	}
}

func TestParseScalePhases(t *testing.T) {
	got, err := ParseScalePhases(" idle=3m, restart=45s", DefaultScalePhases)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultScalePhases
	want.Idle, want.Restart = 3*time.Minute, 45*time.Second
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := ParseScalePhases("", DefaultScalePhases); err != nil || got != DefaultScalePhases {
		t.Errorf("empty: %+v, %v", got, err)
	}
	for in, wantErr := range map[string]string{
		"idle":          "want NAME=DURATION",
		"lunch=1m":      "unknown",
		"idle=0s":       "positive duration",
		"outage=soon":   "positive duration",
		"idle=1m,bad=1": "unknown",
	} {
		if _, err := ParseScalePhases(in, DefaultScalePhases); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: err = %v, want %q", in, err, wantErr)
		}
	}
}

func TestProjectionTable(t *testing.T) {
	tab := ProjectionTable(Fleet{IdleWrites: 5, HeartbeatWrites: 0.1, Watches: 5, EpisodeRequests: 12, EpisodeWrites: 8,
		RestartFirst10s: 20, HeartbeatRestartFirst10s: 1}, []int{1000, 15000})
	out := tab.String()
	for _, want := range []string{
		"evictd idle writes/s (5.00 per agent)  5000   75000",
		"kubelet node Lease writes/s (one per node per 10s)  100   1500",
		"node-problem-detector condition writes/s (one per node per 5m0s)  3.33   50.0",
		"kube-proxy open watches (4 per node, 3 of them cluster-wide)  4000   60000",
		"evictd writes in a zone-wide episode (8.00 per node)  8000   120000",
	} {
		if !strings.Contains(squeeze(out), squeeze(want)) {
			t.Errorf("projection has no line %q:\n%s", want, out)
		}
	}
}

// squeeze collapses runs of spaces, so that a test need not know the
// table's column widths.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestScaleRunTables(t *testing.T) {
	s := Senders{Evictd: evictdUser}
	nodes := []string{"n1", "n2"}
	var reqs []AuditRequest
	// Idle, 0–100 s: n1 renews 5 times a second, n2 once; each keeps two
	// watches; each heartbeat renews every 10 s.
	for i := range 500 {
		reqs = append(reqs, req(evictdUser, "n1", "update", "leases", 200, float64(i)/5, float64(i)/5))
	}
	for i := range 100 {
		reqs = append(reqs, req(evictdUser, "n2", "update", "leases", 200, float64(i), float64(i)))
	}
	for _, node := range nodes {
		reqs = append(reqs, req(evictdUser, node, "watch", "pods", 200, 0, -1), req(evictdUser, node, "watch", "nodes", 200, 0, -1))
		for i := range 10 {
			reqs = append(reqs, req("system:node:"+node, node, "update", "leases", 200, float64(10*i), float64(10*i)))
		}
	}
	// The episode, 100–110 s: each agent renews 3 times a second and
	// evicts twice.
	for _, node := range nodes {
		for i := range 30 {
			reqs = append(reqs, req(evictdUser, node, "update", "leases", 200, 100+float64(i)/3, 100+float64(i)/3))
		}
		reqs = append(reqs, req(evictdUser, node, "create", "pods/eviction", 201, 101, 101), req(evictdUser, node, "create", "pods/eviction", 429, 102, 102))
	}
	// After the restart at 200 s: each agent lists pods again.
	reqs = append(reqs, req(evictdUser, "n1", "list", "pods", 200, 201, 201), req(evictdUser, "n2", "list", "pods", 200, 203, 203))
	api := mustScrape(t, apiMetrics)
	etcd := mustScrape(t, "# TYPE etcd_mvcc_put_total counter\netcd_mvcc_put_total 10\n# TYPE etcd_mvcc_delete_total counter\netcd_mvcc_delete_total 0\n")
	etcdAfter := mustScrape(t, "# TYPE etcd_mvcc_put_total counter\netcd_mvcc_put_total 610\n# TYPE etcd_mvcc_delete_total counter\netcd_mvcc_delete_total 10\n")
	idle := Window{Start: at(0), End: at(100)}
	herd := Window{Start: at(200), End: at(260)}
	run := ScaleRun{
		Title: "test run", Nodes: nodes, Senders: s, Requests: reqs, Cuts: []time.Time{at(150)}, Herd: &herd,
		Baseline: "baseline", Idle: "idle", Episode: []string{"episode"},
		Phases: []ScalePhase{
			{Name: "baseline", Requests: Window{Start: at(-100), End: at(0)}, CPU: Window{Start: at(-100), End: at(0)},
				APIBefore: api, APIAfter: api, EtcdBefore: etcd, EtcdAfter: etcd, APIServerCPU: 10 * time.Second, APIServerRSS: 300 * mib},
			{Name: "idle", Requests: idle, CPU: idle, APIBefore: api, APIAfter: api, EtcdBefore: etcd, EtcdAfter: etcdAfter,
				APIServerCPU: 30 * time.Second, APIServerRSS: 302 * mib, AgentCPU: []time.Duration{time.Second, 3 * time.Second}, Note: "quiet"},
			// An episode whose API server counters start from zero.
			{Name: "episode", Requests: Window{Start: at(100), End: at(110)}, CPU: Window{Start: at(100), End: at(110)},
				APIAfter: api, EtcdBefore: etcdAfter, EtcdAfter: etcdAfter},
			// A restarted API server whose scrape lacks etcd_requests_total
			// and apiserver_longrunning_requests.
			{Name: "restart", Requests: herd, CPU: herd,
				APIAfter:   mustScrape(t, "# TYPE apiserver_watch_events_total counter\napiserver_watch_events_total{kind=\"Pod\"} 30\n"),
				EtcdBefore: etcdAfter, EtcdAfter: etcdAfter},
		},
	}
	tabs, err := run.Tables()
	if err != nil {
		t.Fatal(err)
	}
	if len(tabs) != 5 {
		t.Fatalf("%d tables, want 5 (phases, cost, verbs, herd, projection)", len(tabs))
	}
	var all []string
	for _, tab := range tabs {
		all = append(all, squeeze(tab.String()))
	}
	for i, want := range []struct {
		table int
		line  string
	}{
		// 600 writes and 4 watches in 100 s; n1 5/s, n2 1/s: median 3; 4 watches for 2 agents; 20 heartbeats.
		{0, "idle 100 6.04 6.00 3.00 (1.00–5.00) 302 2.00 0.200 0.100 0 quiet"},
		{0, "baseline 100 0 0 0 (0–0) 0 2.00 0 0 0 -"},
		// After the cut at 150 the watches are gone.
		{0, "restart 60 0.033 0 0 (0–0) 1.00 0 0 0 0 -"},
		// 600 puts + 10 deletes in 100 s; API server 30 % against the baseline's 10 %: 10 points per agent; 2 MiB more: 1024 KiB per agent.
		{1, "idle - - 6.10 14 0 30.00 10.00 302.0 1024 0 0.0 2.00 (1.00–3.00)"},
		// From zero: 30 watch events in 60 s.
		{1, "restart ? ? 0 ? 0.500 0 -5.00 0.0 -153600 0 0.0 -"},
		// From zero, in 10 s: 1004 PUTs and 20 WATCHes; 103 etcd updates
		// and 7 gets; 50 watch events.
		{1, "episode PUT 100, WATCH 2.00 update 10.30, get 0.700 0 14 5.00 0 -5.00 0.0 -153600 0 0.0 -"},
		{1, "?: apiserver_longrunning_requests: no such metric family; apiserver_request_total: no such metric family; etcd_requests_total: no such metric family"},
		{2, "idle evictd update leases - 6.00 3.00 200 ×600"},
		{2, "idle evictd watch pods whole cluster 0.020 0.010 200 ×2"},
		{2, "idle kubelet update leases - 0.200 0.100 200 ×20"},
		{2, "episode evictd create pods/eviction - 0.400 0.200 201 ×2, 429 ×2"},
		{3, "evictd 0.033 2 1 (1 s) 2/2: 1.0 s, 1.0 s, 3.0 s 0/2"},
		{4, "evictd idle writes/s (3.00 per agent) 3000 15000 45000"},
		{4, "evictd open watches (2.00 per agent) 2000 10000 30000"},
		{4, "evictd idle requests/s (3.02 per agent) 3020 15100 45300"},
		// 32 requests per node in 10 s: 30 Lease renewals, at the idle
		// rate (3/s for each of them), and 2 evictions beyond it.
		{4, "evictd requests in a zone-wide episode (32.00 per node) 32000 160000 480000"},
		{4, "of them beyond its idle rate (2.00 per node) 2000 10000 30000"},
		{4, "evictd writes in a zone-wide episode (32.00 per node) 32000 160000 480000"},
	} {
		if !strings.Contains(all[want.table], squeeze(want.line)) {
			t.Errorf("check %d: table %d has no line %q:\n%s", i, want.table, want.line, tabs[want.table])
		}
	}
	if _, err := (ScaleRun{}).Tables(); err == nil {
		t.Error("a run with no nodes made tables")
	}
}

func TestExcess(t *testing.T) {
	lease := RequestKey{SenderEvictd, "update", "leases", ""}
	watch := RequestKey{SenderEvictd, "watch", "pods", "fieldSelector spec.nodeName=NODE"}
	evict := RequestKey{SenderEvictd, "create", "pods/eviction", ""}
	beat := RequestKey{SenderKubelet, "update", "leases", ""}
	base := map[RequestKey]int{lease: 500, watch: 10, beat: 10} // in 100 s
	// In 10 s: renewals above their idle rate by 5, fewer watches than
	// idle (nothing), 3 evictions (all), and heartbeats (another sender).
	counts := map[RequestKey]int{lease: 55, watch: 0, evict: 3, beat: 100}
	reqs, writes := Excess(counts, base, 100, 10, SenderEvictd)
	if reqs != 8 || writes != 8 {
		t.Errorf("Excess = %v requests, %v writes; want 8 and 8", reqs, writes)
	}
	counts[watch] = 3 // 2 more than the 1 idle would give
	if reqs, writes := Excess(counts, base, 100, 10, SenderEvictd); reqs != 10 || writes != 8 {
		t.Errorf("with watches: Excess = %v, %v; want 10 requests, 8 writes", reqs, writes)
	}
	if reqs, _ := Excess(counts, nil, 0, 10, SenderEvictd); reqs != 61 {
		t.Errorf("without a base span: %v requests, want all 61", reqs)
	}
}

func TestFlagValue(t *testing.T) {
	argv := []string{"kube-apiserver", "--etcd-servers=http://127.0.0.1:2379", "--secure-port", "6443", "--v"}
	for name, want := range map[string]string{"--etcd-servers": "http://127.0.0.1:2379", "--secure-port": "6443", "--v": "", "--etcd": ""} {
		if got := FlagValue(argv, name); got != want {
			t.Errorf("FlagValue(%s) = %q, want %q", name, got, want)
		}
	}
}
