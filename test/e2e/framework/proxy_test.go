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
		if at.Sub(start) > hold/2 {
			t.Errorf("%s %s reached the server %s after it was sent, want at once", tt.method, tt.path, at.Sub(start))
		}
		if tt.held && took < hold {
			t.Errorf("%s %s answered after %s, want held for %s", tt.method, tt.path, took, hold)
		}
		if !tt.held && took > hold/2 {
			t.Errorf("%s %s answered after %s, want at once", tt.method, tt.path, took)
		}
	}
	calls := p.HeldCalls()
	if len(calls) != 1 || calls[0].Status != http.StatusCreated || calls[0].Answered.Sub(calls[0].Upstream) < hold {
		t.Errorf("held calls %+v, want the one eviction, answered %s after the server's answer", calls, hold)
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
