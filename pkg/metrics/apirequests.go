// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// apiRequestBuckets, in seconds: a field-selected list or a write answers
// in milliseconds; an eviction waits for admission webhooks (10 s each at
// most by default); the API server gives up on a request after 60 s.
var apiRequestBuckets = []float64{0.005, 0.025, 0.1, 0.25, 1, 4, 15, 60}

// apiRequestMetrics are what evictd asks of the API server, counted by
// pkg/kube's transport (kube.RequestMetrics), as the kubelet's
// rest_client_requests_total and rest_client_request_duration_seconds
// count its own, by verb and resource instead of host and URL. Every label
// value comes from evictd's own calls: a few verbs, its dozen resources,
// the HTTP codes.
type apiRequestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func (m *Metrics) initAPIRequests() {
	a := &m.apiRequests
	a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "api", Name: "requests_total",
		Help: "Requests evictd sent to the API server, each attempt of a retried call on its own, by verb (get, list, watch, create, update, patch, delete), resource (pods, pods/eviction, nodes, nodes/status, leases, events, ...; other outside the resource API) and the answer's HTTP status code (error: no answer, the connection refused or cut, a timeout). A watch counts when the API server answers it; an informer's initial list is a watch too where the API server serves streaming lists, as in its own apiserver_request_total.",
	}, []string{"verb", "resource", "code"})
	a.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "api", Name: "request_duration_seconds",
		Help:    "Time from sending a request to the API server to the end of its answer's body (or to the error that left it unanswered), by verb and resource. Watches are left out: one lasts until it ends, minutes later.",
		Buckets: apiRequestBuckets,
	}, []string{"verb", "resource"})
	m.own = append(m.own, a.requests, a.duration)
}

// APIRequest counts one request to the API server (kube.RequestMetrics).
func (m *Metrics) APIRequest(verb, resource, code string) {
	if m == nil {
		return
	}
	m.apiRequests.requests.WithLabelValues(verb, resource, code).Inc()
}

// APIRequestDuration observes how long one request to the API server
// took, its answer's body included (kube.RequestMetrics).
func (m *Metrics) APIRequestDuration(verb, resource string, took time.Duration) {
	if m == nil {
		return
	}
	m.apiRequests.duration.WithLabelValues(verb, resource).Observe(took.Seconds())
}
