// SPDX-License-Identifier: Apache-2.0

package app

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestLimitInFlight holds as many requests as the bound serves, and wants
// one more answered 429 at once and counted, and one after they ended
// served.
func TestLimitInFlight(t *testing.T) {
	const max = 3
	entered, release := make(chan struct{}, max+1), make(chan struct{})
	refused := 0
	h := limitInFlight(max, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
	}), func() { refused++ })
	var wg sync.WaitGroup
	for range max {
		wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil)) })
		<-entered
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || refused != 1 {
		t.Errorf("one more than %d in flight: status %d, Retry-After %q, %d counted; want 429 with Retry-After, counted once",
			max, w.Code, w.Header().Get("Retry-After"), refused)
	}
	close(release)
	wg.Wait()
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusOK || refused != 1 {
		t.Errorf("after they ended: status %d, %d counted; want served", w.Code, refused)
	}
}
