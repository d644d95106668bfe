// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestReaderGrantsReachOnlyEvictd: the manifest's reader ClusterRoles, as
// the framework applies them, let their subjects read evictd's secure port
// and nothing on the real API server: a scraper bound to
// evictd-metrics-reader reads evictd's /metrics but gets 403 on the API
// server's /metrics, and a reader bound to evictd-explain-reader gets 403
// there on /explain (404 would be a grant the API server honours on a path
// it does not serve).
func TestReaderGrantsReachOnlyEvictd(t *testing.T) {
	m := newMemoryNode(t, "secure")
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--secure-bind-address=127.0.0.1:0")...)
	addr := e.secureAddress()
	ns := m.c.Namespace(t, "callers")
	scraper := callerToken(t, m.c, ns, "scraper", "evictd-metrics-reader")
	reader := callerToken(t, m.c, ns, "reader", "evictd-explain-reader")

	if code, body := secureGet(t, addr, "/metrics", scraper); code != http.StatusOK || !strings.Contains(body, "evictd_ready") {
		t.Fatalf("the scraper on evictd's /metrics: %d, want 200 with evictd's metrics:\n%s", code, firstLines(body, 5))
	}
	if code, body := secureGet(t, addr, "/explain", reader); code != http.StatusOK {
		t.Fatalf("the reader on evictd's /explain: %d, want 200:\n%s", code, firstLines(body, 5))
	}
	for _, tc := range []struct{ who, token, path string }{
		{"the scraper", scraper, "/metrics"},
		{"the reader", reader, "/explain"},
		{"the reader", reader, "/trace"},
	} {
		if code, body := apiServerGet(t, m.c.AdminConfig, tc.path, tc.token); code != http.StatusForbidden {
			t.Errorf("%s on the API server's %s: %d, want 403 (the grant is evictd's only):\n%s", tc.who, tc.path, code, firstLines(body, 3))
		}
	}
}

// TestSecurePortBoundsTokenReviews sends the secure port many requests,
// each with a fresh bogus token, and counts the TokenReviews evictd asked
// the real API server (evictd_api_requests_total{resource="tokenreviews"}):
// at most the bound's burst and its rate over the time taken; the others
// answer 429 at once, each counted in evictd_secure_refused_total.
func TestSecurePortBoundsTokenReviews(t *testing.T) {
	const requests, burst, perSecond = 100, 5, 1 // authdelegate's defaults
	m := newMemoryNode(t, "bounds")
	e := startEvictd(t, m.c, m.node, append(memoryFlags, "--secure-bind-address=127.0.0.1:0")...)
	addr := e.secureAddress()
	// No series until evictd's first TokenReview: none asked yet is 0.
	tokenReviews := map[string]string{"resource": "tokenreviews"}
	before, err := e.scrape().Lookup("evictd_api_requests_total", tokenReviews)
	if err != nil {
		before = 0
	}
	start := time.Now()
	var mu sync.Mutex
	codes := map[int]int{}
	var errs []error
	var wg sync.WaitGroup
	next := make(chan int)
	// Four callers at once, each on a connection of its own it keeps.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for range 4 {
		wg.Go(func() {
			for i := range next {
				code, err := getWithToken(client, "https://"+addr+"/metrics", fmt.Sprintf("bogus-%d-%d", start.UnixNano(), i))
				mu.Lock()
				codes[code]++
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(start)
	if len(errs) > 0 {
		t.Fatalf("%d requests failed, the first: %v", len(errs), errs[0])
	}
	asked := e.scrape().Value(t, "evictd_api_requests_total", tokenReviews) - before
	bound := burst + perSecond*took.Seconds()
	t.Logf("%d requests with fresh tokens in %v: %v; %v TokenReviews", requests, took.Round(time.Millisecond), codes, asked)
	if asked > bound {
		t.Errorf("%v TokenReviews for %d fresh tokens in %v; want at most %.1f (a burst of %d, %d a second)", asked, requests, took, bound, burst, perSecond)
	}
	if codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != requests || codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("answers %v; want only 401 (reviewed) and 429 (past the bound)", codes)
	}
	if got := e.scrape().Value(t, "evictd_secure_refused_total", map[string]string{"reason": "token-reviews"}); got != float64(codes[http.StatusTooManyRequests]) {
		t.Errorf("evictd_secure_refused_total{reason=\"token-reviews\"} = %v; want the %d 429s", got, codes[http.StatusTooManyRequests])
	}

	// The bound refills: a new caller (the cluster's admin, whose answer
	// is then cached for the trace saved at the test's end) is served
	// after the Retry-After the 429s say.
	var code int
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		code, err = getWithToken(client, "https://"+addr+"/metrics", m.c.AdminConfig.BearerToken)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusTooManyRequests || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusOK {
		t.Errorf("a new caller after the flood: %d, want 200 once the bound refills", code)
	}
}

// getWithToken GETs url with a bearer token and drains the answer.
func getWithToken(client *http.Client, url, token string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, err
}

// apiServerGet asks the API server at path with token, as an HTTP client
// that trusts its CA and presents nothing else.
func apiServerGet(t *testing.T, admin *rest.Config, path, token string) (int, string) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s on the API server: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}
