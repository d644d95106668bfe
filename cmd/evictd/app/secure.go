// SPDX-License-Identifier: Apache-2.0

package app

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/authdelegate"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/servingtls"
	"github.com/evictd/evictd/pkg/shadow"
	"github.com/evictd/evictd/pkg/trace"
)

// listenSecure opens the secure port (--secure-bind-address) with its TLS
// certificate; nil when it is off. Opened with the plain port, so a busy
// address or a bad certificate fails before anything starts.
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
	return tls.NewListener(ln, cfg), nil
}

// secureMux serves /explain, /trace and /metrics to callers the API server
// authenticates and authorizes for the path (pkg/authdelegate). The
// pod proxy of the API server cannot reach them: it drops the caller's
// credentials, and would let anyone with pods/proxy read them
// (docs/decide.md, "A running agent").
func secureMux(o *options.Options, l *agent.Loop, m *metrics.Metrics, reviewer authdelegate.Reviewer, rec *shadow.Recorder, tr *trace.Recorder, log *zap.Logger) http.Handler {
	guard := authdelegate.New(reviewer, authdelegate.Options{
		OnError: func(review string, err error) {
			log.Warn("could not ask the API server about a caller; answered 503", zap.String("review", review), zap.Error(err))
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/explain", guard.Wrap(agent.ExplainHandler(l, o.NodeName, o.Evict.DryRun)))
	mux.Handle("/metrics", guard.Wrap(m.Handler()))
	if rec != nil {
		mux.Handle("/shadow", guard.Wrap(shadowHandler(rec)))
	}
	mux.Handle("/trace", guard.Wrap(traceHandler(tr)))
	return mux
}
