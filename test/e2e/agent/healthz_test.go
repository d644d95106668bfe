// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// TestHealthNamedChecks: a real evictd, synced with the real API server but
// blind (its --cgroup-root has no kubepods cgroup), serves /readyz and
// /healthz as named checks: the failing one with its reason in the body
// without ?verbose (what an operator reads through the API server's pod
// proxy), one check by path, ?exclude, and evictd_ready agreeing with the
// unfiltered /readyz.
func TestHealthNamedChecks(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "healthz", MemoryBytes: nodeMemory})
	root, err := node.CreateCgroup("no-kubepods")
	if err != nil {
		t.Fatal(err)
	}
	e := startEvictdWith(t, c, node, evictdSetup{cgroupRoot: root, noWait: true}, "--dry-run")

	// Once the informers have synced, only observing fails.
	_, _, body := e.waitReadyz(60*time.Second, "failed on observing alone", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "[+]informers ok")
	})
	for _, want := range []string{"[-]observing failed: no kubepods cgroup under --cgroup-root", "readyz check failed"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body lacks %q:\n%s", want, body)
		}
	}

	for _, tc := range []struct {
		path     string
		wantCode int
		want     []string
	}{
		{"/readyz/informers", http.StatusOK, []string{"ok"}},
		{"/readyz/observing", http.StatusServiceUnavailable, []string{"[-]observing failed: no kubepods cgroup"}},
		{"/readyz/nope", http.StatusNotFound, []string{`no check "nope" in /readyz; checks: informers, observing`}},
		{"/readyz?exclude=observing", http.StatusOK, []string{"ok"}},
		{"/readyz?exclude=observing&verbose", http.StatusOK, []string{"[+]informers ok", "[+]observing excluded: ok", "readyz check passed"}},
		{"/healthz", http.StatusOK, []string{"ok"}},
		{"/healthz?verbose", http.StatusOK, []string{"[+]loop ok", "healthz check passed"}},
	} {
		code, body := httpGetBody(t, "http://"+e.p.Addr()+tc.path)
		if code != tc.wantCode {
			t.Errorf("GET %s: %d, want %d:\n%s", tc.path, code, tc.wantCode, body)
		}
		for _, want := range tc.want {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s: body lacks %q:\n%s", tc.path, want, body)
			}
		}
	}

	// ?exclude is for the reader only: the metric follows every check.
	if got := e.scrape().Value(t, "evictd_ready", nil); got != 0 {
		t.Errorf("evictd_ready = %v while /readyz fails, want 0", got)
	}
}

func httpGetBody(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}
