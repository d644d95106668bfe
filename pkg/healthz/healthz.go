// SPDX-License-Identifier: Apache-2.0

// Package healthz serves named health checks the way Kubernetes components
// serve theirs (k8s.io/apiserver/pkg/server/healthz): /readyz runs every
// check, /readyz/<name> runs one, ?verbose lists "[+]name ok" and
// "[-]name failed: reason" lines, and ?exclude=name leaves a check out.
//
// It differs from the API server's in two ways, both for operators who can
// read the body only through the API server's pod proxy (the image has no
// shell): a failing answer carries every failing check's reason rather than
// "reason withheld" (evictd's reasons hold no secrets: node signals, pod
// names, the lease holder), and a check can pass with a detail, a warning
// shown in the verbose body that does not fail the probe.
//
// The API server's package is not imported: it pulls in k8s.io/apiserver,
// its metrics and its request filters for about 150 lines of behaviour.
package healthz

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Set is one endpoint's checks (liveness or readiness), run in the order
// they were added. The zero value is not usable; use New. Checks may be
// added while the endpoint is served.
type Set struct {
	name string

	mu     sync.RWMutex
	checks []check
}

type check struct {
	name string
	// run returns a detail to show when it passes ("" for none) or the
	// reason it fails.
	run func() (string, error)
}

// New returns an empty set serving under /<name> ("healthz", "readyz").
func New(name string) *Set { return &Set{name: name} }

// Name is the endpoint's name: "readyz" for /readyz.
func (s *Set) Name() string { return s.name }

// validName keeps a check's name a single path segment and query value
// that reads well in "[+]name ok".
var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// Add adds a check named name: it fails while fn returns an error, whose
// text is the reason shown. It panics on a bad or repeated name, which is a
// programming error found by the first test that builds the set.
func (s *Set) Add(name string, fn func() error) {
	s.add(name, func() (string, error) { return "", fn() })
}

// AddWarning adds a check named name that never fails the endpoint: while
// fn returns a non-empty text, the verbose body shows it after "ok: " (for
// example, a threshold an operator set at or below the kubelet's).
func (s *Set) AddWarning(name string, fn func() string) {
	s.add(name, func() (string, error) { return fn(), nil })
}

// AddDetailed adds a check that can both fail and, when it passes, carry a
// detail: the most general form of Add and AddWarning.
func (s *Set) AddDetailed(name string, fn func() (detail string, err error)) {
	s.add(name, fn)
}

func (s *Set) add(name string, run func() (string, error)) {
	if !validName.MatchString(name) {
		panic(fmt.Sprintf("healthz: check name %q: want lower-case letters, digits and inner dashes", name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.checks {
		if c.name == name {
			panic(fmt.Sprintf("healthz: check %q added twice to /%s", name, s.name))
		}
	}
	s.checks = append(s.checks, check{name: name, run: run})
}

// Names lists the checks in the order they run.
func (s *Set) Names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, len(s.checks))
	for i, c := range s.checks {
		names[i] = c.name
	}
	return names
}

func (s *Set) snapshot() []check {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.checks)
}

// Check runs every check and joins the failures, each prefixed with its
// name; nil when all pass. It is what the endpoint answers without
// ?exclude, so a metric fed from it (evictd_ready) never disagrees with it.
func (s *Set) Check() error {
	var errs []error
	for _, c := range s.snapshot() {
		if _, err := c.run(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// Install serves the set on mux at /<name> and /<name>/<check>.
func (s *Set) Install(mux *http.ServeMux) {
	mux.Handle("/"+s.name, s)
	mux.Handle("/"+s.name+"/", s)
}

// ServeHTTP answers /<name> (every check) or /<name>/<check> (one).
func (s *Set) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	root := "/" + s.name
	switch {
	case r.URL.Path == root || r.URL.Path == root+"/":
		s.serveAll(w, r)
	case strings.HasPrefix(r.URL.Path, root+"/"):
		s.serveOne(w, strings.TrimPrefix(r.URL.Path, root+"/"))
	default:
		http.NotFound(w, r)
	}
}

func (s *Set) serveOne(w http.ResponseWriter, name string) {
	for _, c := range s.snapshot() {
		if c.name != name {
			continue
		}
		detail, err := c.run()
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "[-]%s failed: %s\n", name, oneLine(err.Error()))
			return
		}
		if detail != "" {
			fmt.Fprintf(w, "ok: %s\n", oneLine(detail))
			return
		}
		fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, "no check %q in /%s; checks: %s\n", name, s.name, strings.Join(s.Names(), ", "))
}

func (s *Set) serveAll(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	_, verbose := q["verbose"]
	excluded := map[string]bool{}
	for _, e := range q["exclude"] {
		// The API server takes repeated ?exclude=; a comma list is the
		// natural mistake, so it works too.
		for _, n := range strings.Split(e, ",") {
			if n = strings.TrimSpace(n); n != "" {
				excluded[n] = true
			}
		}
	}
	var body strings.Builder
	failed := false
	for _, c := range s.snapshot() {
		if excluded[c.name] {
			delete(excluded, c.name)
			fmt.Fprintf(&body, "[+]%s excluded: ok\n", c.name)
			continue
		}
		detail, err := c.run()
		switch {
		case err != nil:
			failed = true
			fmt.Fprintf(&body, "[-]%s failed: %s\n", c.name, oneLine(err.Error()))
		case detail != "":
			fmt.Fprintf(&body, "[+]%s ok: %s\n", c.name, oneLine(detail))
		default:
			fmt.Fprintf(&body, "[+]%s ok\n", c.name)
		}
	}
	if len(excluded) > 0 {
		unknown := make([]string, 0, len(excluded))
		for n := range excluded {
			unknown = append(unknown, fmt.Sprintf("%q", n))
		}
		slices.Sort(unknown)
		fmt.Fprintf(&body, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(unknown, ", "))
	}
	// Always verbose on failure, as the API server is, and with the reasons.
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "%s%s check failed\n", body.String(), s.name)
		return
	}
	if !verbose {
		fmt.Fprintln(w, "ok")
		return
	}
	fmt.Fprintf(w, "%s%s check passed\n", body.String(), s.name)
}

// oneLine keeps a joined error (errors.Join puts each on its own line) to
// one line of the list, which a reader and a grep both expect.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }
