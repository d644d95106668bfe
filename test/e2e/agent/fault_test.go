// SPDX-License-Identifier: Apache-2.0

package agent

// Shared helpers of the fault tests (fault_*_test.go): evictd started with
// a kubeconfig, host root or cgroup root of the test's choosing and without
// waiting for it to be ready, /readyz with its body, and log searches.

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/agent/evictdproc"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// evictdSetup says how startEvictdWith runs evictd; empty fields take the
// values startEvictd uses.
type evictdSetup struct {
	bin        string // default: the evictd of make build
	kubeconfig string // default: the cluster's evictd kubeconfig
	hostRoot   string // default: the node's host root
	cgroupRoot string // default: the node's cgroup root
	nodeCgroup string // default: the node's cgroup root, whose memory is the node's
	// noWait returns as soon as the process runs, instead of waiting for
	// /readyz to answer 200.
	noWait bool
	// env and cgroupProcs run evictd as a container would: with this
	// environment (GOMEMLIMIT) and in these cgroups from its first page
	// (evictdproc.Options).
	env         []string
	cgroupProcs []string
}

// startEvictdWith starts evictd with the setup's overrides and extra flags.
// It stops evictd with SIGTERM in t.Cleanup, which also checks that it
// stopped cleanly.
func startEvictdWith(t *testing.T, c *framework.Cluster, node *nodesim.Node, s evictdSetup, extra ...string) *evictd {
	t.Helper()
	if s.kubeconfig == "" {
		s.kubeconfig = c.EvictdKubeconfig
	}
	if s.hostRoot == "" {
		s.hostRoot = node.HostRoot
	}
	if s.cgroupRoot == "" {
		s.cgroupRoot = node.CgroupRoot
	}
	if s.nodeCgroup == "" {
		s.nodeCgroup = node.CgroupRoot
	}
	bin := s.bin
	if bin == "" {
		bin = framework.RequireBinary(t, "evictd")
	}
	args := append([]string{
		"--kubeconfig=" + s.kubeconfig,
		"--node-name=" + node.Name,
		"--host-root=" + s.hostRoot,
		"--cgroup-root=" + s.cgroupRoot,
		"--node-cgroup=" + s.nodeCgroup,
		// A resource's episode ends only after this long without pressure
		// (the kubelet's default is 5m); short here so the scenarios can
		// see episodes end. A test's own flag comes later and wins.
		"--eviction-pressure-transition-period=2s",
		// The brake writes the Node, which the shipped admission policy
		// allows only to a token bound to a pod on it (c.EvictdNodeToken),
		// not to the cluster-wide test token: the brake's tests turn it
		// on with such a token.
		"--node-brake=false",
		// Its trace is saved before it stops and replayed after (ownTrace, replayTrace).
		"--secure-bind-address=127.0.0.1:0",
	}, extra...)
	p, err := evictdproc.Start(evictdproc.Options{Bin: bin, Args: args, LogPath: filepath.Join(t.TempDir(), "evictd.log"),
		Env: s.env, CgroupProcs: s.cgroupProcs})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started %s %s", bin, strings.Join(p.Args(), " "))
	e := &evictd{t: t, p: p, usage: startUsageSampler(p.Pid(), 250*time.Millisecond)}
	t.Cleanup(func() {
		trace := e.ownTrace(c)
		e.stop()
		e.replayTrace(trace)
		if t.Failed() {
			t.Logf("evictd log (last 60 lines of %s):\n%s", p.LogPath(), p.Tail(60))
		}
	})
	if !s.noWait {
		if err := p.WaitReady(context.Background(), 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// readyz returns /readyz's status (0 when there is no answer) and body.
func (e *evictd) readyz() (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.p.Addr()+"/readyz", nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitReadyz polls /readyz until cond holds for its status and body, and
// fails the test naming what it waited for and the last answer.
func (e *evictd) waitReadyz(timeout time.Duration, what string, cond func(code int, body string) bool) (time.Time, int, string) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := e.readyz()
		if cond(code, body) {
			return time.Now(), code, body
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("evictd's /readyz never %s within %s; last answer: %d %q; log tail:\n%s", what, timeout, code, body, e.tail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// warnings returns the warn and error lines whose raw JSON contains every
// one of words (case-insensitive).
func (e *evictd) warnings(words ...string) []logEntry {
	var out []logEntry
	for _, l := range e.logs() {
		if l.Level != "warn" && l.Level != "error" {
			continue
		}
		raw := strings.ToLower(l.Raw)
		all := true
		for _, w := range words {
			all = all && strings.Contains(raw, strings.ToLower(w))
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// rawLines joins the raw text of entries, for failure messages.
func rawLines(entries []logEntry) string {
	var b strings.Builder
	for _, l := range entries {
		b.WriteString("\n\t")
		b.WriteString(l.Raw)
	}
	return b.String()
}

// entriesSince returns the entries at or after t.
func entriesSince(entries []logEntry, t time.Time) []logEntry {
	var out []logEntry
	for _, l := range entries {
		if !l.TS.Before(t) {
			out = append(out, l)
		}
	}
	return out
}
