// SPDX-License-Identifier: Apache-2.0

package healthz

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// newServer serves a readyz set of three checks: informers (fails until
// synced), lease (fails while held elsewhere) and thresholds (a warning
// while warn is set).
func newServer(t *testing.T) (base string, synced, leaseHeld *atomic.Bool, warn *atomic.Pointer[string], set *Set) {
	t.Helper()
	synced, leaseHeld, warn = new(atomic.Bool), new(atomic.Bool), new(atomic.Pointer[string])
	set = New("readyz")
	set.Add("informers", func() error {
		if !synced.Load() {
			return errors.New("informers have not synced yet")
		}
		return nil
	})
	set.Add("lease", func() error {
		if leaseHeld.Load() {
			return errors.Join(errors.New("another evictd holds this node's lease"), errors.New("holder evictd-abc"))
		}
		return nil
	})
	set.AddWarning("thresholds", func() string {
		if w := warn.Load(); w != nil {
			return *w
		}
		return ""
	})
	mux := http.NewServeMux()
	set.Install(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, synced, leaseHeld, warn, set
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q", url, ct)
	}
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	base, synced, leaseHeld, warn, _ := newServer(t)
	warning := "memory.available<100Mi sits at or below the kubelet's memory.available<750Mi"

	tests := []struct {
		name               string
		synced, held, warn bool
		path               string
		wantCode           int
		wantBody           string // exact
	}{
		{name: "all pass", synced: true, path: "/readyz", wantCode: 200, wantBody: "ok\n"},
		{name: "all pass, trailing slash", synced: true, path: "/readyz/", wantCode: 200, wantBody: "ok\n"},
		{name: "verbose", synced: true, path: "/readyz?verbose", wantCode: 200,
			wantBody: "[+]informers ok\n[+]lease ok\n[+]thresholds ok\nreadyz check passed\n"},
		{name: "a warning passes, silent unless verbose", synced: true, warn: true, path: "/readyz", wantCode: 200, wantBody: "ok\n"},
		{name: "a warning shows in verbose", synced: true, warn: true, path: "/readyz?verbose=1", wantCode: 200,
			wantBody: "[+]informers ok\n[+]lease ok\n[+]thresholds ok: " + warning + "\nreadyz check passed\n"},
		{name: "failing: reasons without verbose", synced: true, held: true, path: "/readyz", wantCode: 503,
			wantBody: "[+]informers ok\n[-]lease failed: another evictd holds this node's lease; holder evictd-abc\n[+]thresholds ok\nreadyz check failed\n"},
		{name: "two failing, a warning beside them", held: true, warn: true, path: "/readyz", wantCode: 503,
			wantBody: "[-]informers failed: informers have not synced yet\n[-]lease failed: another evictd holds this node's lease; holder evictd-abc\n[+]thresholds ok: " + warning + "\nreadyz check failed\n"},
		{name: "exclude the failing one", synced: true, held: true, path: "/readyz?exclude=lease", wantCode: 200, wantBody: "ok\n"},
		{name: "exclude, verbose", synced: true, held: true, path: "/readyz?exclude=lease&verbose", wantCode: 200,
			wantBody: "[+]informers ok\n[+]lease excluded: ok\n[+]thresholds ok\nreadyz check passed\n"},
		{name: "exclude two, repeated and comma-separated", held: true, path: "/readyz?exclude=lease,informers&exclude=thresholds", wantCode: 200, wantBody: "ok\n"},
		{name: "exclude an unknown check", synced: true, held: true, path: "/readyz?exclude=leese", wantCode: 503,
			wantBody: "[+]informers ok\n[-]lease failed: another evictd holds this node's lease; holder evictd-abc\n[+]thresholds ok\n" +
				"warn: some health checks cannot be excluded: no matches for \"leese\"\nreadyz check failed\n"},
		{name: "one check, passing", synced: true, held: true, path: "/readyz/informers", wantCode: 200, wantBody: "ok\n"},
		{name: "one check, failing", synced: true, held: true, path: "/readyz/lease", wantCode: 503,
			wantBody: "[-]lease failed: another evictd holds this node's lease; holder evictd-abc\n"},
		{name: "one check, a warning", synced: true, warn: true, path: "/readyz/thresholds", wantCode: 200, wantBody: "ok: " + warning + "\n"},
		{name: "one unknown check", synced: true, path: "/readyz/nope", wantCode: 404,
			wantBody: "no check \"nope\" in /readyz; checks: informers, lease, thresholds\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synced.Store(tt.synced)
			leaseHeld.Store(tt.held)
			warn.Store(nil)
			if tt.warn {
				warn.Store(&warning)
			}
			code, body := get(t, base+tt.path)
			if code != tt.wantCode || body != tt.wantBody {
				t.Errorf("GET %s: %d\n%s\nwant %d\n%s", tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

// TestCheckAgreesWithEndpoint: Check (what evictd_ready reports) fails
// exactly when the unfiltered endpoint does, naming each failing check.
func TestCheckAgreesWithEndpoint(t *testing.T) {
	base, synced, leaseHeld, warn, set := newServer(t)
	w := "a warning"
	warn.Store(&w)
	for _, tc := range []struct{ synced, held bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		synced.Store(tc.synced)
		leaseHeld.Store(tc.held)
		err := set.Check()
		code, _ := get(t, base+"/readyz")
		if (err == nil) != (code == 200) {
			t.Errorf("synced=%v held=%v: Check() = %v but /readyz answered %d", tc.synced, tc.held, err, code)
		}
		if err != nil {
			if tc.held && !strings.Contains(err.Error(), "lease: another evictd holds this node's lease") {
				t.Errorf("Check() = %q, want it to name the lease check", err)
			}
			if !tc.synced && !strings.Contains(err.Error(), "informers: informers have not synced yet") {
				t.Errorf("Check() = %q, want it to name the informers check", err)
			}
		}
	}
}

// TestAddWhileServing: a check added after the endpoint is served counts
// at once (other parts of the agent add theirs as they start).
func TestAddWhileServing(t *testing.T) {
	base, synced, _, _, set := newServer(t)
	synced.Store(true)
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz %d before the late check, want 200", code)
	}
	set.Add("late", func() error { return errors.New("not yet") })
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "[-]late failed: not yet\n") {
		t.Errorf("/readyz after adding a failing check: %d %q", code, body)
	}
	if got, want := strings.Join(set.Names(), ","), "informers,lease,thresholds,late"; got != want {
		t.Errorf("Names() = %s, want %s", got, want)
	}
}

func TestAddRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "Lease", "a b", "a/b", "-a", "a-", "lease"} {
		t.Run(name, func(t *testing.T) {
			set := New("readyz")
			set.Add("lease", func() error { return nil })
			defer func() {
				r := recover()
				if r == nil {
					t.Fatalf("Add(%q) did not panic", name)
				}
				if !strings.Contains(r.(string), "\""+name+"\"") {
					t.Errorf("panic %q does not name %q", r, name)
				}
			}()
			set.Add(name, func() error { return nil })
		})
	}
}

func TestHealthzPath(t *testing.T) {
	set := New("healthz")
	set.Add("loop", func() error { return errors.New("the agent loop has not finished a pass for 3m0s") })
	mux := http.NewServeMux()
	set.Install(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	code, body := get(t, srv.URL+"/healthz")
	if want := "[-]loop failed: the agent loop has not finished a pass for 3m0s\nhealthz check failed\n"; code != 503 || body != want {
		t.Errorf("/healthz: %d %q, want 503 %q", code, body, want)
	}
	if code, _ := get(t, srv.URL+"/readyz"); code != 404 {
		t.Errorf("/readyz on a healthz-only mux: %d, want 404", code)
	}
}
