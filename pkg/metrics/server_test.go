// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/healthz"
)

func TestServe(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "v0-test"})
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	readyz := healthz.New("readyz")
	readyz.Add("informers", func() error {
		if !ready.Load() {
			return errors.New("pod informer not synced")
		}
		return nil
	})
	mux := NewMux(m, Checks{Readyz: readyz})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, mux) }()
	base := "http://" + ln.Addr().String()

	tests := []struct {
		path     string
		setReady bool
		wantCode int
		wantBody string
	}{
		{"/healthz", false, 200, "ok"},
		{"/readyz", false, 503, "pod informer not synced"},
		{"/readyz", true, 200, "ok"},
		{"/readyz/informers", false, 503, "[-]informers failed: pod informer not synced"},
		{"/readyz?verbose", true, 200, "[+]informers ok\nreadyz check passed"},
		{"/metrics", true, 200, `evictd_build_info{branch=`},
		{"/metrics", true, 200, "process_cpu_seconds_total"},
		{"/nope", true, 404, ""},
	}
	for _, tt := range tests {
		ready.Store(tt.setReady)
		code, body := get(t, base+tt.path)
		if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
			t.Errorf("GET %s (ready=%v): %d %q, want %d containing %q", tt.path, tt.setReady, code, trim(body), tt.wantCode, tt.wantBody)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel: %v, want nil", err)
		}
	case <-time.After(ShutdownTimeout + 30*time.Second):
		t.Fatalf("Serve had not returned %s after its context was cancelled", ShutdownTimeout+30*time.Second)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("server still answering after shutdown")
	}
}

func TestServeReportsListenerFailure(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "v0-test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // Serve on a closed listener fails at once.
	err = Serve(context.Background(), ln, NewMux(m, Checks{}))
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Serve on closed listener: %v, want an error naming %s", err, addr)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
