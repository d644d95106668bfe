// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/evictd/evictd/pkg/healthz"
)

// Checks are the named probes behind /healthz and /readyz (package
// healthz: /readyz/<name>, ?verbose, ?exclude=). A nil set always passes.
type Checks struct {
	// Healthz (liveness): fail only when a restart would help.
	Healthz *healthz.Set
	// Readyz (readiness): for the agent, the pod informer has synced and the
	// last successful observation is recent.
	Readyz *healthz.Set
}

// NewMux serves /metrics from m and /healthz and /readyz from checks; no
// /metrics when m is nil (served elsewhere, behind authorization).
func NewMux(m *Metrics, checks Checks) *http.ServeMux {
	mux := http.NewServeMux()
	if m != nil {
		mux.Handle("/metrics", m.Handler())
	}
	for _, set := range []struct {
		s    *healthz.Set
		name string
	}{{checks.Healthz, "healthz"}, {checks.Readyz, "readyz"}} {
		if set.s == nil {
			set.s = healthz.New(set.name)
		}
		if set.s.Name() != set.name {
			// A swapped pair would serve liveness as readiness: a
			// programming error, caught by the first test that serves it.
			panic(fmt.Sprintf("metrics: /%s given the set for /%s", set.name, set.s.Name()))
		}
		set.s.Install(mux)
	}
	return mux
}

// ShutdownTimeout bounds how long Serve waits for in-flight requests once
// its context is cancelled.
const ShutdownTimeout = 5 * time.Second

// Serve serves h on ln until ctx is cancelled, then shuts down gracefully
// (in-flight scrapes finish, up to ShutdownTimeout) and returns nil. It
// returns an error if serving fails for any other reason. The caller opens
// ln (net.Listen), so a bad or busy address is reported before anything
// starts, and ":0" works in tests.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	// ctx is already cancelled, so the shutdown gets a fresh deadline of its own.
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down metrics server on %s: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
	}
	return nil
}
