// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIProxy is a reverse proxy on a loopback port in front of the test API
// server, for one client whose kubeconfig points at it (see
// Cluster.StartAPIProxy). It passes every request on at once; for the
// requests its Hold function names, it holds the API server's answer back
// for a while before passing it on, the way a slow or congested path to the
// API server looks to a client whose request has already taken effect.
// Watches and other streams pass through unbuffered.
type APIProxy struct {
	// URL is https://127.0.0.1:PORT. The proxy serves TLS with a
	// certificate of its own (client-go sends credentials over TLS only);
	// CAData is that certificate, PEM, for the client to verify it with.
	URL    string
	CAData []byte

	upstream *url.URL
	hold     func(*http.Request) time.Duration
	rt       http.RoundTripper
	srv      *http.Server
	done     chan struct{}
	clk      func() time.Time

	mu    sync.Mutex
	calls []HeldCall
	// release is closed by ReleaseHeld.
	release     chan struct{}
	releaseOnce sync.Once
}

// HeldCall is one request whose answer the proxy held.
type HeldCall struct {
	Method, Path string
	// Received is when the request reached the proxy; it was passed on to
	// the API server at once.
	Received time.Time
	// Upstream is when the API server answered the proxy, and Status its
	// HTTP status (0 when the API server could not be reached).
	Upstream time.Time
	Status   int
	// Answered is when the answer went to the client (zero while held);
	// ClientGone says the client gave up first, and when.
	Answered   time.Time
	ClientGone time.Time
}

// IsEviction reports whether r creates a policy/v1 Eviction:
// POST /api/v1/namespaces/NS/pods/NAME/eviction.
func IsEviction(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	return len(parts) == 7 && parts[0] == "api" && parts[1] == "v1" && parts[2] == "namespaces" &&
		parts[4] == "pods" && parts[6] == "eviction"
}

// NewAPIProxy starts a proxy on a free loopback port in front of the API
// server at upstream (an https URL verified with caData). hold says how long
// to hold each request's answer (0: pass it on at once).
func NewAPIProxy(upstream string, caData []byte, hold func(*http.Request) time.Duration) (*APIProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("API proxy upstream %q: %w", upstream, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caData) {
		return nil, errors.New("API proxy: no certificate in the CA data")
	}
	rt := &http.Transport{
		Proxy:               nil,
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}
	cert, certPEM, err := loopbackCert()
	if err != nil {
		return nil, fmt.Errorf("API proxy: %w", err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("API proxy: %w", err)
	}
	if hold == nil {
		hold = func(*http.Request) time.Duration { return 0 }
	}
	p := &APIProxy{URL: "https://" + ln.Addr().String(), CAData: certPEM, upstream: u, hold: hold, rt: rt, done: make(chan struct{}), clk: time.Now, release: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream as they come
	}
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := p.hold(r); d > 0 {
			p.serveHeld(w, r, d)
			return
		}
		rp.ServeHTTP(w, r)
	})
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// serveHeld passes the request on, reads the whole answer, and gives it to
// the client only after d (or not at all, if the client gives up first).
func (p *APIProxy) serveHeld(w http.ResponseWriter, r *http.Request, d time.Duration) {
	i := p.record(HeldCall{Method: r.Method, Path: r.URL.Path, Received: p.clk()})
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.upstream.Scheme, p.upstream.Host
	out.Host = p.upstream.Host
	resp, err := p.rt.RoundTrip(out)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	status := http.StatusBadGateway
	if err == nil {
		status = resp.StatusCode
	}
	p.update(i, func(c *HeldCall) {
		c.Upstream = p.clk()
		if err == nil {
			c.Status = status
		}
	})
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.release:
	case <-r.Context().Done():
		p.update(i, func(c *HeldCall) { c.ClientGone = p.clk() })
		return
	}
	if err != nil {
		http.Error(w, "API proxy: "+err.Error(), http.StatusBadGateway)
	} else {
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(status)
		_, _ = io.Copy(w, bytes.NewReader(body))
	}
	p.update(i, func(c *HeldCall) { c.Answered = p.clk() })
}

// ReleaseHeld passes every answer held now, and every one held from now
// on, to its client at once: a test ends a hold on an event of its own
// rather than on the clock.
func (p *APIProxy) ReleaseHeld() { p.releaseOnce.Do(func() { close(p.release) }) }

func (p *APIProxy) record(c HeldCall) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
	return len(p.calls) - 1
}

func (p *APIProxy) update(i int, f func(*HeldCall)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.calls[i])
}

// HeldCalls returns the requests whose answers were held, in the order
// they arrived.
func (p *APIProxy) HeldCalls() []HeldCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]HeldCall(nil), p.calls...)
}

// WriteKubeconfig writes a kubeconfig for the proxy that authenticates with
// token.
func (p *APIProxy) WriteKubeconfig(path, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "user"}
	kc.CurrentContext = "proxy"
	return clientcmd.WriteToFile(*kc, path)
}

// Close stops the proxy; held answers are dropped.
func (p *APIProxy) Close() error {
	err := p.srv.Close()
	<-p.done
	if t, ok := p.rt.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	return err
}

// loopbackCert makes a self-signed serving certificate for 127.0.0.1.
func loopbackCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "evictd-e2e-api-proxy"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// EvictdProxy is an API proxy for evictd: Kubeconfig holds evictd's
// ServiceAccount identity, like Cluster.EvictdKubeconfig, but points at the
// proxy.
type EvictdProxy struct {
	*APIProxy
	Kubeconfig string
}

// StartEvictdProxy starts an API proxy (NewAPIProxy) in front of this
// cluster's API server, writes a kubeconfig with evictd's identity for it,
// and closes it in t.Cleanup. Everything else (the test's clients, the
// simulated nodes) keeps talking to the API server directly.
func (c *Cluster) StartEvictdProxy(t testing.TB, hold func(*http.Request) time.Duration) *EvictdProxy {
	t.Helper()
	p, err := NewAPIProxy(c.Server, c.CAData, hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	kc := filepath.Join(t.TempDir(), "evictd-proxy.kubeconfig")
	if err := p.WriteKubeconfig(kc, c.EvictdConfig.BearerToken); err != nil {
		t.Fatal(err)
	}
	return &EvictdProxy{APIProxy: p, Kubeconfig: kc}
}
