// SPDX-License-Identifier: Apache-2.0

package app

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/authdelegate"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/servingtls"
	"github.com/evictd/evictd/pkg/shadow"
	"github.com/evictd/evictd/pkg/trace"
)

// The secure port's bounds. Its callers are a Prometheus or two (one
// connection each, one scrape at a time) and a few people with evictd
// explain or trace: well under these. Each connection costs evictd a TLS
// session and a goroutine (tens of KiB), each request in flight the
// answer it builds (a trace is the largest: --trace-size); at the bounds,
// all of it stays within a few MiB of the agent's memory limit (the
// chart's 96Mi). Connections past the cap wait in the listen backlog until
// one closes; requests past the in-flight cap answer 429 at once.
const (
	secureMaxConnections = 32
	secureMaxInFlight    = 8
)

// listenSecure opens the secure port (--secure-bind-address) with its TLS
// certificate; nil when it is off. Opened with the plain port, so a busy
// address or a bad certificate fails before anything starts. It accepts
// at most secureMaxConnections at once.
func listenSecure(o *options.Options, now time.Time) (net.Listener, error) {
	if o.SecureAddr == "" {
		return nil, nil
	}
	cfg, err := servingtls.Config(o.TLSCertFile, o.TLSKeyFile, o.NodeName, now)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", options.FlagSecureAddress, err)
	}
	ln, err := net.Listen("tcp", o.SecureAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on --%s %q: %w", options.FlagSecureAddress, o.SecureAddr, err)
	}
	return tls.NewListener(netutil.LimitListener(ln, secureMaxConnections), cfg), nil
}

// secureMux serves /explain, /shadow, /trace and /metrics to callers the
// API server authenticates and authorizes for get on the node's
// subresource of the same name in the API group evictd.io
// (pkg/authdelegate), at most secureMaxInFlight at once. The pod proxy of
// the API server cannot reach them: it drops the caller's credentials, and
// would let anyone with pods/proxy read them (docs/decide.md, "A running
// agent").
func secureMux(o *options.Options, l *agent.Loop, m *metrics.Metrics, reviewer authdelegate.Reviewer, rec *shadow.Recorder, tr *trace.Recorder, log *zap.Logger) http.Handler {
	guard := authdelegate.New(reviewer, authdelegate.Options{
		Node: o.NodeName,
		OnError: func(review string, err error) {
			log.Warn("could not ask the API server about a caller; answered 503", zap.String("review", review), zap.Error(err))
		},
		OnRefused: func(string) { m.SecureRefused(metrics.SecureRefusedTokenReviews) },
	})
	mux := http.NewServeMux()
	mux.Handle("/explain", guard.Wrap("explain", agent.ExplainHandler(l, o.NodeName, o.Evict.DryRun)))
	mux.Handle("/metrics", guard.Wrap("metrics", m.Handler()))
	if rec != nil {
		mux.Handle("/shadow", guard.Wrap("shadow", shadowHandler(rec)))
	}
	mux.Handle("/trace", guard.Wrap("trace", traceHandler(tr)))
	return limitInFlight(secureMaxInFlight, mux, func() { m.SecureRefused(metrics.SecureRefusedInFlight) })
}

// limitInFlight serves at most max requests at once; one more answers 429
// at once (as the API server's max-requests-inflight does), and refused is
// told.
func limitInFlight(max int, next http.Handler, refused func()) http.Handler {
	slots := make(chan struct{}, max)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, req)
		default:
			refused()
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too Many Requests: the secure port serves a few requests at once; try again", http.StatusTooManyRequests)
		}
	})
}
