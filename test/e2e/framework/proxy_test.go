// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestIsEviction(t *testing.T) {
	tests := []struct {
		method, path string
		want         bool
	}{
		{http.MethodPost, "/api/v1/namespaces/ns/pods/web/eviction", true},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/web/eviction", false},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/web", false},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/web/binding", false},
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/ns/events", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if got := IsEviction(r); got != tt.want {
			t.Errorf("IsEviction(%s %s) = %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
}

// TestAPIProxyHoldsAnswers: a held request reaches the server at once, its
// answer reaches the client only after the hold; others pass straight on.
// "At once" is checked by order, on the proxy's and the server's own stamps
// (the server saw the request before the proxy started holding), never by a
// wall-clock bound a loaded machine could miss.
func TestAPIProxyHoldsAnswers(t *testing.T) {
	const hold = 300 * time.Millisecond
	reached := make(chan time.Time, 10)
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- time.Now()
		w.Header().Set("X-Path", r.URL.Path)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "answer to "+r.Method+" "+r.URL.Path)
	}))
	defer up.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})
	p, err := NewAPIProxy(up.URL, ca, func(r *http.Request) time.Duration {
		if IsEviction(r) {
			return hold
		}
		return 0
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CAData) {
		t.Fatal("no certificate in the proxy's CAData")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var heldReached time.Time // when the server saw the held request
	for _, tt := range []struct {
		method, path string
		held         bool
	}{
		{http.MethodGet, "/api/v1/pods", false},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/web/eviction", true},
	} {
		start := time.Now()
		req, _ := http.NewRequest(tt.method, p.URL+tt.path, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		at := <-reached
		if resp.StatusCode != http.StatusCreated || string(body) != "answer to "+tt.method+" "+tt.path || resp.Header.Get("X-Path") != tt.path {
			t.Errorf("%s %s: got %d %q (X-Path %q), want the server's answer", tt.method, tt.path, resp.StatusCode, body, resp.Header.Get("X-Path"))
		}
		// A lower bound only: the hold is a floor the proxy must keep,
		// however slow the machine.
		if tt.held && took < hold {
			t.Errorf("%s %s answered after %s, want held for %s", tt.method, tt.path, took, hold)
		}
		if tt.held {
			heldReached = at
		}
		// That the unheld request was not held is the proxy's own record
		// (below: it is not among the held calls), not a stopwatch.
	}
	calls := p.HeldCalls()
	if len(calls) != 1 {
		t.Fatalf("held calls %+v, want only the eviction (the GET must pass straight on)", calls)
	}
	c := calls[0]
	if c.Method != http.MethodPost || c.Path != "/api/v1/namespaces/ns/pods/web/eviction" || c.Status != http.StatusCreated {
		t.Errorf("held call %+v, want the eviction, answered %d", c, http.StatusCreated)
	}
	// The request went on at once: the server saw it after the proxy got
	// it and before the server's answer came back, so before the hold.
	if heldReached.Before(c.Received) || heldReached.After(c.Upstream) {
		t.Errorf("the server saw the eviction at %s, want between the proxy receiving it (%s) and the server's answer (%s)",
			heldReached.Format(time.StampMicro), c.Received.Format(time.StampMicro), c.Upstream.Format(time.StampMicro))
	}
	// Its answer was held back after the server's: answered no sooner
	// than hold after the server answered.
	if c.Answered.Sub(c.Upstream) < hold {
		t.Errorf("held call answered %s after the server's answer, want at least %s", c.Answered.Sub(c.Upstream), hold)
	}
	if !c.ClientGone.IsZero() {
		t.Errorf("held call %+v: the client gave up, want it answered", c)
	}
}

// TestAPIProxyKubeconfig: a client built from the proxy's kubeconfig
// verifies the proxy and sends its token through it to the API server.
func TestAPIProxyKubeconfig(t *testing.T) {
	auth := make(chan string, 1)
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case auth <- r.Header.Get("Authorization"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer up.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})
	p, err := NewAPIProxy(up.URL, ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.WriteKubeconfig(kc, "secret-token"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list pods through the proxy: %v", err)
	}
	if got := <-auth; got != "Bearer secret-token" {
		t.Errorf("the API server got Authorization %q, want the kubeconfig's token", got)
	}
}
