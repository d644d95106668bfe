// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Check reports whether the process is healthy or ready; nil means yes and
// an error says why not (it is written into the 503 response body).
type Check func() error

// Checks are the probes behind /healthz and /readyz. A nil Check always
// passes.
type Checks struct {
	// Healthz (liveness): fail only when a restart would help.
	Healthz Check
	// Readyz (readiness): for the agent, the pod informer has synced and the
	// last successful observation is recent.
	Readyz Check
}

// NewMux serves /metrics from m and /healthz and /readyz from checks.
func NewMux(m *Metrics, checks Checks) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.Handle("/healthz", checkHandler(checks.Healthz))
	mux.Handle("/readyz", checkHandler(checks.Readyz))
	return mux
}

func checkHandler(c Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if c != nil {
			if err := c(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ok: %v\n", err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
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
