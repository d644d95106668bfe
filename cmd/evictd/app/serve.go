// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/healthz"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
)

// servers are the agent's two HTTP servers: the plain one (/metrics,
// /healthz, /readyz) and the secure port (--secure-bind-address).
type servers struct {
	plain, secure net.Listener
	ctx           context.Context
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	mu            sync.Mutex
	failed        error
}

// listen opens both listeners, so that a busy address or a bad certificate
// fails before anything else starts.
func listen(o *options.Options, now time.Time) (*servers, error) {
	plain, err := net.Listen("tcp", o.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on --%s %q: %w", options.FlagMetricsAddress, o.MetricsAddr, err)
	}
	secure, err := listenSecure(o, now)
	if err != nil {
		plain.Close()
		return nil, fmt.Errorf("%w: %w", options.ErrUsage, err)
	}
	s := &servers{plain: plain, secure: secure}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// serve starts serving; secure builds the secure port's handler, when it
// has a listener. A server that fails calls failed (which stops the
// agent), and its error is Run's.
func (s *servers) serve(o *options.Options, m *metrics.Metrics, healthy, ready *healthz.Set, secure func() http.Handler, failed func(), log *zap.Logger) {
	plainMetrics := m
	if o.SecureMetricsOnly {
		plainMetrics = nil
	}
	s.start("metrics", s.plain, metrics.NewMux(plainMetrics, metrics.Checks{Healthz: healthy, Readyz: ready}), failed, log)
	if s.secure != nil {
		s.start("secure", s.secure, secure(), failed, log)
	}
}

func (s *servers) start(name string, ln net.Listener, h http.Handler, failed func(), log *zap.Logger) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := metrics.Serve(s.ctx, ln, h); err != nil {
			s.mu.Lock()
			s.failed = err
			s.mu.Unlock()
			log.Error(name+" server failed", logging.Err(err))
			failed()
		}
	}()
}

// secureAddr is the secure port's address, "" without one.
func (s *servers) secureAddr() string {
	if s.secure == nil {
		return ""
	}
	return s.secure.Addr().String()
}

// stop shuts the servers down gracefully and waits for them.
func (s *servers) stop() {
	s.cancel()
	s.wg.Wait()
}

// err is the error a server failed with, nil if none did.
func (s *servers) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *servers) close() {
	s.cancel()
	s.plain.Close()
	if s.secure != nil {
		s.secure.Close()
	}
}
