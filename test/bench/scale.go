// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The scale benchmark's pure parts: the audit log read as requests, counted
// by sender, verb and resource over a phase; the API server's and etcd's
// counters between two scrapes; the restart herd; the projection to large
// clusters.

// The senders the scale benchmark tells apart.
const (
	// SenderEvictd is evictd's ServiceAccount, whatever node its token is
	// bound to.
	SenderEvictd = "evictd"
	// SenderKubelet is a node identity (system:node:NAME): the kubelet
	// heartbeat stand-ins.
	SenderKubelet = "kubelet"
	// SenderOther is everyone else: the harness, the simulated nodes
	// (admin), the controller manager and the API server itself.
	SenderOther = "other"
)

// nodeUserPrefix starts the user name of a node identity.
const nodeUserPrefix = "system:node:"

// NodeNameExtra is the user-info extra key holding the node of the pod a
// ServiceAccount token is bound to (framework.NodeNameClaim).
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// AuditRequest is one API request as the audit log records it.
type AuditRequest struct {
	ID   string
	User string
	// Node is the node the sender acts for: the node-name claim of a
	// pod-bound ServiceAccount token, or NAME of system:node:NAME; "" for
	// any other sender.
	Node string
	Verb string
	// Resource is the resource with its API group after a dot and its
	// subresource after a slash, as kubectl writes them
	// (leases.coordination.k8s.io, nodes/status); a non-resource request
	// has its path (/readyz).
	Resource string
	// Scope is what a list, watch or deletecollection covers: "in NS" for
	// one namespace, and its field and label selectors, the sender's own
	// node named NODE; "" for the whole cluster, and for other verbs.
	Scope    string
	Code     int
	Received time.Time
	// Ended is when the answer completed; zero when the log has no end for
	// it (a watch still open, or cut off by the API server's exit).
	Ended time.Time
}

// IsWrite reports whether verb changes stored state (an etcd write).
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// ParseAuditRequests reads a JSON-lines audit log written with
// requestAuditPolicy and returns one AuditRequest per audit ID, in the
// order of their first event: a watch's ResponseStarted opens it, and
// ResponseComplete (or Panic) ends any request. A line that is not an audit
// event is an error naming its line number.
func ParseAuditRequests(r io.Reader) ([]AuditRequest, error) {
	var out []AuditRequest
	index := map[string]int{}
	err := eachAuditEvent(r, func(n int, ev auditEvent) error {
		if ev.AuditID == "" || ev.Stage == "" {
			return fmt.Errorf("audit log line %d: not an audit event (no auditID or stage)", n)
		}
		if ev.Stage == "RequestReceived" {
			return nil
		}
		i, seen := index[ev.AuditID]
		if !seen {
			req, err := newAuditRequest(ev)
			if err != nil {
				return fmt.Errorf("audit log line %d: %w", n, err)
			}
			i = len(out)
			index[ev.AuditID] = i
			out = append(out, req)
		}
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code != 0 {
			out[i].Code = ev.ResponseStatus.Code
		}
		if ev.Stage == "ResponseComplete" || ev.Stage == "Panic" {
			ended, err := time.Parse(time.RFC3339Nano, ev.StageTimestamp)
			if err != nil {
				return fmt.Errorf("audit log line %d: stageTimestamp %q: %w", n, ev.StageTimestamp, err)
			}
			out[i].Ended = ended
			if ev.Stage == "Panic" && out[i].Code == 0 {
				out[i].Code = 500
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func newAuditRequest(ev auditEvent) (AuditRequest, error) {
	received, err := time.Parse(time.RFC3339Nano, ev.RequestReceivedTimestamp)
	if err != nil {
		return AuditRequest{}, fmt.Errorf("requestReceivedTimestamp %q: %w", ev.RequestReceivedTimestamp, err)
	}
	req := AuditRequest{ID: ev.AuditID, User: ev.User.Username, Verb: ev.Verb, Received: received}
	if node, ok := strings.CutPrefix(req.User, nodeUserPrefix); ok {
		req.Node = node
	} else if v := ev.User.Extra[NodeNameExtra]; len(v) > 0 {
		req.Node = v[0]
	}
	switch {
	case ev.ObjectRef != nil:
		req.Resource = ev.ObjectRef.Resource
		if ev.ObjectRef.APIGroup != "" {
			req.Resource += "." + ev.ObjectRef.APIGroup
		}
		if ev.ObjectRef.Subresource != "" {
			req.Resource += "/" + ev.ObjectRef.Subresource
		}
	default:
		req.Resource, _, _ = strings.Cut(ev.RequestURI, "?")
	}
	if ev.ObjectRef != nil && (req.Verb == "list" || req.Verb == "watch" || req.Verb == "deletecollection") {
		req.Scope = scopeOf(ev.ObjectRef.Namespace, ev.RequestURI, req.Node)
	}
	return req, nil
}

// scopeOf is a collection request's Scope: its namespace, and the field
// and label selectors of its URI with node written NODE, so that every
// agent's requests for its own node group together.
func scopeOf(namespace, uri, node string) string {
	var parts []string
	if namespace != "" {
		parts = append(parts, "in "+namespace)
	}
	if _, query, ok := strings.Cut(uri, "?"); ok {
		if q, err := url.ParseQuery(query); err == nil {
			for _, key := range []string{"fieldSelector", "labelSelector"} {
				if v := q.Get(key); v != "" {
					if node != "" {
						v = strings.ReplaceAll(v, node, "NODE")
					}
					parts = append(parts, key+" "+v)
				}
			}
		}
	}
	return strings.Join(parts, ", ")
}

// Senders tells the scale benchmark's senders apart by user name.
type Senders struct {
	// Evictd is the user name of evictd's ServiceAccount
	// (system:serviceaccount:NAMESPACE:NAME).
	Evictd string
}

// Of is the sender of r: SenderEvictd, SenderKubelet or SenderOther.
func (s Senders) Of(r AuditRequest) string {
	switch {
	case s.Evictd != "" && r.User == s.Evictd:
		return SenderEvictd
	case strings.HasPrefix(r.User, nodeUserPrefix):
		return SenderKubelet
	}
	return SenderOther
}

// Window is a span of time [Start, End).
type Window struct {
	Start, End time.Time
}

// Seconds is the window's length.
func (w Window) Seconds() float64 { return w.End.Sub(w.Start).Seconds() }

// Contains reports whether t is in the window.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.Start) && t.Before(w.End) }

// RequestKey groups requests by sender, verb, resource and scope.
type RequestKey struct {
	Sender, Verb, Resource, Scope string
}

// keyOf is r's RequestKey.
func (s Senders) keyOf(r AuditRequest) RequestKey {
	return RequestKey{Sender: s.Of(r), Verb: r.Verb, Resource: r.Resource, Scope: r.Scope}
}

// CountRequests counts the requests received in w by sender, verb,
// resource and scope (a watch counts once, when it is made).
func CountRequests(reqs []AuditRequest, w Window, s Senders) map[RequestKey]int {
	out := map[RequestKey]int{}
	for _, r := range reqs {
		if w.Contains(r.Received) {
			out[s.keyOf(r)]++
		}
	}
	return out
}

// SenderTotals adds counts up by sender: all requests, and writes.
func SenderTotals(counts map[RequestKey]int) (all, writes map[string]int) {
	all, writes = map[string]int{}, map[string]int{}
	for k, n := range counts {
		all[k.Sender] += n
		if IsWrite(k.Verb) {
			writes[k.Sender] += n
		}
	}
	return all, writes
}

// NodeRates is, for each of nodes in order, the requests per second in w
// that sender sent for that node and that match (all when match is nil): a
// node that sent none has 0.
func NodeRates(reqs []AuditRequest, w Window, s Senders, sender string, nodes []string, match func(AuditRequest) bool) []float64 {
	count := map[string]int{}
	for _, r := range reqs {
		if w.Contains(r.Received) && s.Of(r) == sender && (match == nil || match(r)) {
			count[r.Node]++
		}
	}
	out := make([]float64, len(nodes))
	secs := w.Seconds()
	for i, n := range nodes {
		if secs > 0 {
			out[i] = float64(count[n]) / secs
		}
	}
	return out
}

// WriteRequest matches the requests that write (IsWrite).
func WriteRequest(r AuditRequest) bool { return IsWrite(r.Verb) }

// OpenWatches counts the watches open at time at, by sender, resource and
// scope.
// A watch the log never saw end ended at the first of cuts (the API
// server's exits) after it was made, if any: its server took it along.
func OpenWatches(reqs []AuditRequest, at time.Time, cuts []time.Time, s Senders) map[RequestKey]int {
	out := map[RequestKey]int{}
	for _, r := range reqs {
		if r.Verb != "watch" || r.Received.After(at) {
			continue
		}
		end := r.Ended
		if end.IsZero() {
			for _, c := range cuts {
				if c.After(r.Received) && (end.IsZero() || c.Before(end)) {
					end = c
				}
			}
		}
		if end.IsZero() || end.After(at) {
			out[s.keyOf(r)]++
		}
	}
	return out
}

// Spread is when each of a group of senders did something first, as
// offsets from a start: the first, the median and the last of them, and
// how many of the group did it at all.
type Spread struct {
	Of, N               int
	First, Median, Last time.Duration
}

// String is "50/50: 0.2 s, 3.1 s, 9.8 s", or "0/50".
func (s Spread) String() string {
	if s.N == 0 {
		return fmt.Sprintf("0/%d", s.Of)
	}
	return fmt.Sprintf("%d/%d: %s, %s, %s", s.N, s.Of, secs(s.First), secs(s.Median), secs(s.Last))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// Herd is one sender's requests after an API server restart.
type Herd struct {
	// Requests in the whole window and in its first 10 s.
	Requests, First10s int
	// Peak is the most requests received in one second of the window, At
	// the start of that second as an offset from the window's start.
	Peak int
	At   time.Duration
	// FirstRequest is when each node's first request came;
	// FirstWrite its first write the API server accepted (2xx).
	FirstRequest, FirstWrite Spread
}

// HerdAfter describes sender's requests for nodes received in w, w.Start
// being when the restarted API server's process started.
func HerdAfter(reqs []AuditRequest, w Window, s Senders, sender string, nodes []string) Herd {
	var h Herd
	perSecond := map[int]int{}
	firstReq, firstWrite := map[string]time.Duration{}, map[string]time.Duration{}
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	for _, r := range reqs {
		if !w.Contains(r.Received) || s.Of(r) != sender {
			continue
		}
		off := r.Received.Sub(w.Start)
		h.Requests++
		if off < 10*time.Second {
			h.First10s++
		}
		perSecond[int(off/time.Second)]++
		if !want[r.Node] {
			continue
		}
		if d, ok := firstReq[r.Node]; !ok || off < d {
			firstReq[r.Node] = off
		}
		if IsWrite(r.Verb) && r.Code >= 200 && r.Code < 300 {
			if d, ok := firstWrite[r.Node]; !ok || off < d {
				firstWrite[r.Node] = off
			}
		}
	}
	for sec, n := range perSecond {
		if n > h.Peak || (n == h.Peak && time.Duration(sec)*time.Second < h.At) {
			h.Peak, h.At = n, time.Duration(sec)*time.Second
		}
	}
	h.FirstRequest = spreadOf(firstReq, len(nodes))
	h.FirstWrite = spreadOf(firstWrite, len(nodes))
	return h
}

func spreadOf(first map[string]time.Duration, of int) Spread {
	ds := make([]time.Duration, 0, len(first))
	for _, d := range first {
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return Spread{Of: of}
	}
	slices.Sort(ds)
	return Spread{Of: of, N: len(ds), First: ds[0], Median: nearestRank(ds, 0.5), Last: ds[len(ds)-1]}
}

// Scrape is one reading of a Prometheus text exposition (/metrics).
type Scrape map[string]*dto.MetricFamily

// ParseScrape reads the Prometheus text format.
func ParseScrape(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Scrape(mfs), nil
}

// errNoFamily is SumBy's error for a family the scrape does not have.
var errNoFamily = errors.New("no such metric family")

// SumBy adds up the counter, gauge or untyped series of family whose labels
// include every pair of match, grouped by the value of label by ("" puts
// all in one group, keyed ""). A family missing from the scrape is an
// error: a renamed metric must not read as zero.
func (s Scrape) SumBy(family string, match map[string]string, by string) (map[string]float64, error) {
	series, err := s.series(family, match)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, v := range series {
		out[v.labels[by]] += v.value
	}
	return out, nil
}

// Sum is SumBy in one group.
func (s Scrape) Sum(family string, match map[string]string) (float64, error) {
	m, err := s.SumBy(family, match, "")
	if err != nil {
		return 0, err
	}
	return m[""], nil
}

// CounterDelta is after minus before for each group of a counter (see
// SumBy), series by series: a nil before is a process that started within
// the span (its counters began at zero), and a series that went down was
// reset by a restart in between and counts from zero too.
func CounterDelta(before, after Scrape, family string, match map[string]string, by string) (map[string]float64, error) {
	a, err := after.series(family, match)
	if err != nil {
		return nil, err
	}
	b := map[string]labelledValue{}
	if before != nil {
		if b, err = before.series(family, match); err != nil {
			return nil, err
		}
	}
	out := map[string]float64{}
	for id, v := range a {
		d := v.value - b[id].value
		if d < 0 {
			d = v.value
		}
		out[v.labels[by]] += d
	}
	return out, nil
}

// labelledValue is one series: its labels and value.
type labelledValue struct {
	labels map[string]string
	value  float64
}

// series are the counter, gauge or untyped series of family whose labels
// include match, keyed by their whole label set.
func (s Scrape) series(family string, match map[string]string) (map[string]labelledValue, error) {
	mf, ok := s[family]
	if !ok {
		return nil, fmt.Errorf("%s: %w", family, errNoFamily)
	}
	out := map[string]labelledValue{}
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		var id strings.Builder
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
			fmt.Fprintf(&id, "%s=%q,", l.GetName(), l.GetValue())
		}
		matched := true
		for k, v := range match {
			matched = matched && labels[k] == v
		}
		if !matched {
			continue
		}
		var v float64
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_UNTYPED:
			v = m.GetUntyped().GetValue()
		default:
			return nil, fmt.Errorf("%s is a %s, not a counter or gauge", family, mf.GetType())
		}
		out[id.String()] = labelledValue{labels: labels, value: v}
	}
	return out, nil
}

// Distribution is the median, least and largest of xs; zeros for none.
type Distribution struct {
	Median, Min, Max float64
}

// Distribute summarizes xs.
func Distribute(xs []float64) Distribution {
	if len(xs) == 0 {
		return Distribution{}
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Distribution{Median: med, Min: s[0], Max: s[n-1]}
}

// String is "5.00 (4.90–5.10)": the median, then the range.
func (d Distribution) String() string {
	return fmt.Sprintf("%s (%s–%s)", Rate(d.Median), Rate(d.Min), Rate(d.Max))
}

// Rate formats a rate (or any small figure) with the precision its size
// needs: three significant digits, and none below 0.001 but 0.
func Rate(x float64) string {
	// Rounded to its three significant digits first, so that a measured
	// 0.09999 a second times 1,000 reads 100, not 99.99.
	if ax := math.Abs(x); ax >= 0.001 && ax < 100 {
		scale := math.Pow(10, 2-math.Floor(math.Log10(ax)))
		x = math.Round(x*scale) / scale
	}
	switch ax := math.Abs(x); {
	case ax == 0:
		return "0"
	case ax < 0.001:
		return strconv.FormatFloat(x, 'e', 1, 64)
	case ax < 0.01:
		return fmt.Sprintf("%.4f", x)
	case ax < 1:
		return fmt.Sprintf("%.3f", x)
	case ax < 100:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.0f", x)
}

// PerSecond divides n by the window's length; 0 for an empty window.
func PerSecond(n float64, w Window) float64 {
	if s := w.Seconds(); s > 0 {
		return n / s
	}
	return 0
}

// Grouped formats counts per second by key as "update 5.00, get 0.10",
// largest first (ties by key), leaving out keys under 0.0005/s.
func Grouped(counts map[string]float64, w Window) string {
	type kv struct {
		k string
		v float64
	}
	var xs []kv
	for k, v := range counts {
		if r := PerSecond(v, w); r >= 0.0005 {
			xs = append(xs, kv{k, r})
		}
	}
	if len(xs) == 0 {
		return "-"
	}
	sort.Slice(xs, func(i, j int) bool {
		if xs[i].v != xs[j].v {
			return xs[i].v > xs[j].v
		}
		return xs[i].k < xs[j].k
	})
	parts := make([]string, len(xs))
	for i, x := range xs {
		k := x.k
		if k == "" {
			k = "(none)"
		}
		parts[i] = k + " " + Rate(x.v)
	}
	return strings.Join(parts, ", ")
}

// Excess is what sender asked in a span of secs beyond its rates in a
// base span of baseSecs, kind (RequestKey) by kind, never below zero for a
// kind: requests, and writes among them. A kind the base span has none of
// counts whole; one it sent more of counts nothing. No base span (baseSecs
// 0) counts everything.
func Excess(counts, base map[RequestKey]int, baseSecs, secs float64, sender string) (requests, writes float64) {
	for k, c := range counts {
		if k.Sender != sender {
			continue
		}
		expected := 0.0
		if baseSecs > 0 {
			expected = float64(base[k]) / baseSecs * secs
		}
		if extra := float64(c) - expected; extra > 0 {
			requests += extra
			if IsWrite(k.Verb) {
				writes += extra
			}
		}
	}
	return requests, writes
}

// Fleet figures the projection reads from a run, each per node.
type Fleet struct {
	// IdleWrites is evictd's writes per second per agent at idle (the
	// median over agents); HeartbeatWrites the kubelet heartbeat's.
	IdleWrites, HeartbeatWrites float64
	// IdleRequests is evictd's requests per second per agent at idle (all
	// agents' over their number).
	IdleRequests float64
	// Watches is evictd's open watches per agent at idle.
	Watches float64
	// EpisodeRequests and EpisodeWrites are evictd's requests and writes
	// per node from the episode's start until its brake was lifted;
	// EpisodeExtraRequests and EpisodeExtraWrites what is beyond its idle
	// rates over that time, kind by kind (Excess): what the episode itself
	// asks.
	EpisodeRequests, EpisodeWrites           float64
	EpisodeExtraRequests, EpisodeExtraWrites float64
	// RestartFirst10s is evictd's and the heartbeat's requests per node in
	// the first 10 s after an API server restart.
	RestartFirst10s, HeartbeatRestartFirst10s float64
}

// Facts about other node agents the projection sets beside evictd, from
// their sources (docs/performance.md names them).
const (
	// kubeletLeaseRenewal: the kubelet renews its node Lease every
	// nodeLeaseDurationSeconds (40) × 0.25.
	kubeletLeaseRenewal = 10 * time.Second
	// npdHeartbeat: node-problem-detector's --k8s-exporter-heartbeat-period,
	// a node status write even when nothing changed.
	npdHeartbeat = 5 * time.Minute
	// kubeProxyWatches: Services, EndpointSlices and ServiceCIDRs of the
	// whole cluster (label- and field-selected, never by node), and its own
	// Node by name.
	kubeProxyWatches, kubeProxyClusterWideWatches = 4, 3
)

// ProjectionTable projects the run's per-node figures to clusters of the
// given sizes, beside the kubelet's heartbeat, node-problem-detector and
// kube-proxy.
func ProjectionTable(f Fleet, sizes []int) *Table {
	tab := &Table{Title: "projection: the run's per-node figures times the node count", Header: []string{"figure"}}
	for _, n := range sizes {
		tab.Header = append(tab.Header, fmt.Sprintf("%d nodes", n))
	}
	row := func(name string, perNode float64) {
		cells := []any{name}
		for _, n := range sizes {
			cells = append(cells, Rate(perNode*float64(n)))
		}
		tab.Row(cells...)
	}
	row(fmt.Sprintf("evictd idle requests/s (%s per agent)", Rate(f.IdleRequests)), f.IdleRequests)
	row(fmt.Sprintf("evictd idle writes/s (%s per agent)", Rate(f.IdleWrites)), f.IdleWrites)
	row(fmt.Sprintf("kubelet node Lease writes/s (measured %s per node)", Rate(f.HeartbeatWrites)), f.HeartbeatWrites)
	row(fmt.Sprintf("kubelet node Lease writes/s (one per node per %s)", kubeletLeaseRenewal), 1/kubeletLeaseRenewal.Seconds())
	row(fmt.Sprintf("node-problem-detector condition writes/s (one per node per %s)", npdHeartbeat), 1/npdHeartbeat.Seconds())
	row(fmt.Sprintf("evictd open watches (%s per agent)", Rate(f.Watches)), f.Watches)
	row(fmt.Sprintf("kube-proxy open watches (%d per node, %d of them cluster-wide)", kubeProxyWatches, kubeProxyClusterWideWatches), kubeProxyWatches)
	row(fmt.Sprintf("evictd requests in a zone-wide episode (%s per node)", Rate(f.EpisodeRequests)), f.EpisodeRequests)
	row(fmt.Sprintf("  of them beyond its idle rate (%s per node)", Rate(f.EpisodeExtraRequests)), f.EpisodeExtraRequests)
	row(fmt.Sprintf("evictd writes in a zone-wide episode (%s per node)", Rate(f.EpisodeWrites)), f.EpisodeWrites)
	row(fmt.Sprintf("  of them beyond its idle rate (%s per node)", Rate(f.EpisodeExtraWrites)), f.EpisodeExtraWrites)
	row(fmt.Sprintf("evictd requests in the first 10 s after an API server restart (%s per node)", Rate(f.RestartFirst10s)), f.RestartFirst10s)
	row(fmt.Sprintf("kubelet heartbeat requests in the same 10 s (%s per node)", Rate(f.HeartbeatRestartFirst10s)), f.HeartbeatRestartFirst10s)
	return tab
}

// ScalePhaseSpec holds the scale benchmark's phase lengths.
type ScalePhaseSpec struct {
	// Baseline: the nodes and their heartbeats alone, before any agent.
	Baseline time.Duration
	// Idle: every agent ready, no pressure anywhere.
	Idle time.Duration
	// EpisodeMin: the episode phase lasts at least this long, and until
	// every node's hog is gone.
	EpisodeMin time.Duration
	// Outage: the API server is down this long.
	Outage time.Duration
	// Restart: measured after the API server's restart.
	Restart time.Duration
}

// DefaultScalePhases size a run of 50 agents to about 15 minutes, with the
// episode's end (evictd's 5-minute pressure transition period) the longest
// phase.
var DefaultScalePhases = ScalePhaseSpec{
	Baseline:   60 * time.Second,
	Idle:       120 * time.Second,
	EpisodeMin: 30 * time.Second,
	Outage:     20 * time.Second,
	Restart:    90 * time.Second,
}

// ParseScalePhases reads "idle=3m,restart=60s": the phases named change
// their length, the others keep def's. Unknown names and durations that
// are not positive are errors.
func ParseScalePhases(s string, def ScalePhaseSpec) (ScalePhaseSpec, error) {
	out := def
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	fields := map[string]*time.Duration{
		"baseline": &out.Baseline, "idle": &out.Idle, "episode": &out.EpisodeMin,
		"outage": &out.Outage, "restart": &out.Restart,
	}
	for _, part := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return def, fmt.Errorf("phase %q: want NAME=DURATION (names: baseline, idle, episode, outage, restart)", part)
		}
		dst, known := fields[name]
		if !known {
			return def, fmt.Errorf("phase %q: unknown (names: baseline, idle, episode, outage, restart)", name)
		}
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return def, fmt.Errorf("phase %s=%q: want a positive duration such as 90s", name, value)
		}
		*dst = d
	}
	return out, nil
}

// CountCodes counts the answers to the requests received in w, by
// RequestKey, then by HTTP status (0: none logged).
func CountCodes(reqs []AuditRequest, w Window, s Senders) map[RequestKey]map[int]int {
	out := map[RequestKey]map[int]int{}
	for _, r := range reqs {
		if !w.Contains(r.Received) {
			continue
		}
		k := s.keyOf(r)
		if out[k] == nil {
			out[k] = map[int]int{}
		}
		out[k][r.Code]++
	}
	return out
}

// ScalePhase is one measured phase of a scale run.
type ScalePhase struct {
	Name string
	// Requests is where requests are counted; CPU where the API server's
	// CPU time was measured (the same, but after a restart: from the new
	// server's readiness).
	Requests, CPU Window
	// The API server's and etcd's /metrics at the start and the end. A
	// nil APIBefore is a server that started in the phase.
	APIBefore, APIAfter, EtcdBefore, EtcdAfter Scrape
	// CPU time in the phase and VmRSS at its end.
	APIServerCPU, EtcdCPU time.Duration
	APIServerRSS, EtcdRSS int64
	// AgentCPU is each agent's CPU time in the phase; nil before they run.
	AgentCPU []time.Duration
	Note     string
}

// ScaleRun is a whole scale run, as its tables need it.
type ScaleRun struct {
	Title    string
	Nodes    []string
	Senders  Senders
	Requests []AuditRequest
	Phases   []ScalePhase
	// Cuts are when the API server was stopped (see OpenWatches).
	Cuts []time.Time
	// Herd is the window after the restart (nil: no restart).
	Herd *Window
	// Baseline and Idle name those phases; Episode the phases from the
	// episode's start until its brakes were lifted.
	Baseline, Idle string
	Episode        []string
	Notes          []string
}

// phase is the phase named name, if any.
func (r ScaleRun) phase(name string) (ScalePhase, bool) {
	for _, p := range r.Phases {
		if p.Name == name {
			return p, true
		}
	}
	return ScalePhase{}, false
}

// Tables are the run's result: requests by sender per phase, the control
// plane's cost per phase, requests by verb and resource, the restart herd,
// and the projection to large clusters. A metric family missing from a
// scrape shows as "?" with a note naming it, never as 0.
func (r ScaleRun) Tables() ([]*Table, error) {
	if len(r.Nodes) == 0 {
		return nil, errors.New("a scale run with no nodes")
	}
	n := float64(len(r.Nodes))
	missing := map[string]bool{}
	get := func(err error) bool {
		if err != nil {
			missing[err.Error()] = true
			return false
		}
		return true
	}

	byPhase := &Table{
		Title: r.Title,
		Header: []string{"phase", "s", "evictd req/s", "evictd writes/s", "writes/s per agent: median (min–max)", "evictd req per agent in all",
			"evictd watches per agent", "kubelet req/s", "kubelet writes/s per node", "other req/s", "what happened"},
	}
	for _, p := range r.Phases {
		all, writes := SenderTotals(CountRequests(r.Requests, p.Requests, r.Senders))
		perAgent := Distribute(NodeRates(r.Requests, p.Requests, r.Senders, SenderEvictd, r.Nodes, WriteRequest))
		perKubelet := Distribute(NodeRates(r.Requests, p.Requests, r.Senders, SenderKubelet, r.Nodes, WriteRequest))
		watches := OpenWatches(r.Requests, p.Requests.End, r.Cuts, r.Senders)
		evictdWatches := 0
		for k, c := range watches {
			if k.Sender == SenderEvictd {
				evictdWatches += c
			}
		}
		byPhase.Row(p.Name, fmt.Sprintf("%.0f", p.Requests.Seconds()),
			Rate(PerSecond(float64(all[SenderEvictd]), p.Requests)), Rate(PerSecond(float64(writes[SenderEvictd]), p.Requests)),
			perAgent, Rate(float64(all[SenderEvictd])/n), Rate(float64(evictdWatches)/n),
			Rate(PerSecond(float64(all[SenderKubelet]), p.Requests)), Rate(perKubelet.Median),
			Rate(PerSecond(float64(all[SenderOther]), p.Requests)), orDash(p.Note))
	}
	byPhase.Notes = append(byPhase.Notes, r.Notes...)
	byPhase.Notes = append(byPhase.Notes,
		"writes = create, update, patch, delete; a watch counts once, when made; watches per agent: evictd's watches open at the phase's end")

	cost := &Table{
		Title: "the control plane's cost per phase (CPU % of one core; above baseline: this phase's figure less the baseline phase's, per agent)",
		Header: []string{"phase", "API requests/s by verb (apiserver_request_total)", "etcd requests/s by operation (API server's etcd_requests_total)", "etcd puts+deletes/s (etcd)",
			"watches open", "watch events sent/s", "API server CPU %", "above baseline per agent", "API server RSS MiB",
			"above baseline per agent KiB", "etcd CPU %", "etcd RSS MiB", "evictd CPU % per agent: median (min–max)"},
	}
	base, haveBase := r.phase(r.Baseline)
	cpuPct := func(d time.Duration, w Window) float64 { return 100 * PerSecond(d.Seconds(), w) }
	for _, p := range r.Phases {
		apiReqs, etcdOps, mvcc := "?", "?", "?"
		if byVerb, err := CounterDelta(p.APIBefore, p.APIAfter, "apiserver_request_total", nil, "verb"); get(err) {
			apiReqs = Grouped(byVerb, p.Requests)
		}
		if ops, err := CounterDelta(p.APIBefore, p.APIAfter, "etcd_requests_total", nil, "operation"); get(err) {
			etcdOps = Grouped(ops, p.Requests)
		}
		puts, err1 := CounterDelta(p.EtcdBefore, p.EtcdAfter, "etcd_mvcc_put_total", nil, "")
		dels, err2 := CounterDelta(p.EtcdBefore, p.EtcdAfter, "etcd_mvcc_delete_total", nil, "")
		if get(err1) && get(err2) {
			mvcc = Rate(PerSecond(puts[""]+dels[""], p.Requests))
		}
		inFlight, events := "?", "?"
		if v, err := p.APIAfter.Sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH"}); get(err) {
			inFlight = fmt.Sprintf("%.0f", v)
		}
		if sent, err := CounterDelta(p.APIBefore, p.APIAfter, "apiserver_watch_events_total", nil, ""); get(err) {
			events = Rate(PerSecond(sent[""], p.Requests))
		}
		apiCPU := cpuPct(p.APIServerCPU, p.CPU)
		cpuAbove, rssAbove := "-", "-"
		if haveBase && p.Name != r.Baseline {
			cpuAbove = Rate((apiCPU - cpuPct(base.APIServerCPU, base.CPU)) / n)
			rssAbove = Rate(float64(p.APIServerRSS-base.APIServerRSS) / 1024 / n)
		}
		agentCPU := "-"
		if len(p.AgentCPU) > 0 {
			pcts := make([]float64, len(p.AgentCPU))
			for i, d := range p.AgentCPU {
				pcts[i] = cpuPct(d, p.CPU)
			}
			agentCPU = Distribute(pcts).String()
		}
		cost.Row(p.Name, apiReqs, etcdOps, mvcc, inFlight, events, Rate(apiCPU), cpuAbove, mebibytes(p.APIServerRSS), rssAbove,
			Rate(cpuPct(p.EtcdCPU, p.Requests)), mebibytes(p.EtcdRSS), agentCPU)
	}
	cost.Notes = append(cost.Notes,
		"CPU = utime + stime of /proc/PID/stat over the phase; RSS = VmRSS at its end; etcd puts+deletes from etcd's etcd_mvcc_put_total and _delete_total",
		"API requests, watches open (apiserver_longrunning_requests{verb=\"WATCH\"} at the phase's end) and watch events sent "+
			"(apiserver_watch_events_total) are everyone's: the harness's and the simulated nodes' included")

	verbs := &Table{
		Title:  "evictd's and the kubelet heartbeat's requests by verb and resource (per second: all senders; per node: per agent or heartbeat)",
		Header: []string{"phase", "sender", "verb", "resource", "scope", "req/s", "per node /s", "answers"},
	}
	for _, p := range r.Phases {
		codes := CountCodes(r.Requests, p.Requests, r.Senders)
		var keys []RequestKey
		for k := range codes {
			if k.Sender != SenderOther {
				keys = append(keys, k)
			}
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := keys[i], keys[j]
			if a.Sender != b.Sender {
				return a.Sender < b.Sender
			}
			if a.Resource != b.Resource {
				return a.Resource < b.Resource
			}
			if a.Verb != b.Verb {
				return a.Verb < b.Verb
			}
			return a.Scope < b.Scope
		})
		for _, k := range keys {
			total := 0
			var answers []string
			var cs []int
			for c := range codes[k] {
				cs = append(cs, c)
			}
			slices.Sort(cs)
			for _, c := range cs {
				total += codes[k][c]
				answers = append(answers, fmt.Sprintf("%d ×%d", c, codes[k][c]))
			}
			rate := PerSecond(float64(total), p.Requests)
			scope := k.Scope
			if scope == "" && (k.Verb == "list" || k.Verb == "watch") {
				scope = "whole cluster"
			}
			verbs.Row(p.Name, k.Sender, k.Verb, k.Resource, orDash(scope), Rate(rate), Rate(rate/n), strings.Join(answers, ", "))
		}
	}

	tabs := []*Table{byPhase, cost, verbs}
	verbs.Notes = append(verbs.Notes, "scope: a list's or watch's namespace and selectors, the agent's own node named NODE")
	fleet := Fleet{}
	idle, haveIdle := r.phase(r.Idle)
	var idleCounts map[RequestKey]int
	if haveIdle {
		idleCounts = CountRequests(r.Requests, idle.Requests, r.Senders)
		all, _ := SenderTotals(idleCounts)
		fleet.IdleRequests = PerSecond(float64(all[SenderEvictd]), idle.Requests) / n
		fleet.IdleWrites = Distribute(NodeRates(r.Requests, idle.Requests, r.Senders, SenderEvictd, r.Nodes, WriteRequest)).Median
		fleet.HeartbeatWrites = Distribute(NodeRates(r.Requests, idle.Requests, r.Senders, SenderKubelet, r.Nodes, WriteRequest)).Median
		for k, c := range OpenWatches(r.Requests, idle.Requests.End, r.Cuts, r.Senders) {
			if k.Sender == SenderEvictd {
				fleet.Watches += float64(c) / n
			}
		}
	}
	for _, name := range r.Episode {
		if p, ok := r.phase(name); ok {
			counts := CountRequests(r.Requests, p.Requests, r.Senders)
			all, writes := SenderTotals(counts)
			fleet.EpisodeRequests += float64(all[SenderEvictd]) / n
			fleet.EpisodeWrites += float64(writes[SenderEvictd]) / n
			extra, extraWrites := Excess(counts, idleCounts, idle.Requests.Seconds(), p.Requests.Seconds(), SenderEvictd)
			fleet.EpisodeExtraRequests += extra / n
			fleet.EpisodeExtraWrites += extraWrites / n
		}
	}
	if r.Herd != nil {
		herd := &Table{
			Title: "after the API server's restart (from its process's start): the herd",
			Header: []string{"sender", "req/s over the phase", "in the first 10 s", "peak req/s (second)",
				"first request per node: first, median, last", "first accepted write per node"},
		}
		for _, sender := range []string{SenderEvictd, SenderKubelet} {
			h := HerdAfter(r.Requests, *r.Herd, r.Senders, sender, r.Nodes)
			herd.Row(sender, Rate(PerSecond(float64(h.Requests), *r.Herd)), h.First10s, fmt.Sprintf("%d (%.0f s)", h.Peak, h.At.Seconds()),
				h.FirstRequest, h.FirstWrite)
			if sender == SenderEvictd {
				fleet.RestartFirst10s = float64(h.First10s) / n
			} else {
				fleet.HeartbeatRestartFirst10s = float64(h.First10s) / n
			}
		}
		tabs = append(tabs, herd)
	}
	tabs = append(tabs, ProjectionTable(fleet, []int{1000, 5000, 15000}))
	if len(missing) > 0 {
		var ms []string
		for m := range missing {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		cost.Notes = append(cost.Notes, "?: "+strings.Join(ms, "; "))
	}
	return tabs, nil
}

// mebibytes formats bytes in MiB with one decimal.
func mebibytes(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FlagValue is the value of the flag name (--name=value or --name value)
// in a command line; "" when it is not there.
func FlagValue(argv []string, name string) string {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}
