// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/explain"
	"github.com/evictd/evictd/pkg/thresholds"
)

func runExplain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := explainCmd(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestExplainCommand: the rank fixtures (memory.available 250Mi, under the
// default 300Mi; nodefs at 9 %, under 15 %) explained with evictd's
// defaults and with the fixture's configuration (batch's group offset
// -1000 puts report-7f9 first for memory).
func TestExplainCommand(t *testing.T) {
	s, p := td("summary.json"), td("pods.json")
	code, out, errOut := runExplain(t, "--summary", s, "--pods", p, "-o", "json")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rep explain.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not the report's JSON: %v\n%s", err, out)
	}
	by := map[string]explain.Signal{}
	for _, sig := range rep.Signals {
		by[string(sig.Signal)] = sig
	}
	// payments-0 is annotated evictd.io/evict=false, and by default no
	// namespace may opt out: 772Mi over its request, it goes first.
	mem := by["memory.available"]
	if mem.Need != 50<<20 || len(mem.Next) != 1 || mem.Next[0].Name != "payments-0" || mem.Next[0].Frees != 900<<20 {
		t.Errorf("memory.available: need %d, next %+v; want 50Mi to free, payments-0 freeing 900Mi", mem.Need, mem.Next)
	}
	// The agent's own decision, from one pass of its loop over the capture.
	if d := mem.Decision; d == nil || d.Action != explain.ActionEvict || d.Pod != "shop/payments-0" || d.Threshold != "memory.available<300Mi" {
		t.Errorf("memory.available: decision %+v; want the agent to evict shop/payments-0 for memory.available<300Mi", d)
	}
	for _, pod := range mem.Pods {
		if pod.Name == "payments-0" && !strings.HasSuffix(pod.Why,
			"; annotation evictd.io/evict=false not honoured: namespace shop may not opt out (optOut in the configuration)") {
			t.Errorf("payments-0's why %q does not say its opt-out was not honoured", pod.Why)
		}
	}
	if d := by["pid.available"].Decision; d == nil || d.Action != explain.ActionNone {
		t.Errorf("pid.available: decision %+v; want none", d)
	}
	for _, pod := range mem.Pods {
		if pod.Name == "etcd-node-1" && (pod.Eligible || pod.Rank != 0 || !strings.Contains(pod.Why, "mirror of a static pod")) {
			t.Errorf("the static pod %+v, want it never eligible, with why", pod)
		}
	}
	disk := by["nodefs.available"]
	if n := len(disk.Next); n == 0 || !disk.Next[n-1].Unknown || disk.Next[0].Name != "report-7f9" {
		t.Errorf("nodefs.available: next %+v; want report-7f9 first and the pod with no usage figure last, freeing an unknown amount", disk.Next)
	}

	code, out, errOut = runExplain(t, "--summary", s, "--pods", p, "--config", td("config.yaml"))
	if code != exitOK || errOut != "" {
		t.Fatalf("with --config: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"memory.available: 250Mi available of 8Gi\n  threshold memory.available<300Mi: met: evictd acts at once\n" +
			"  evictd evicts batch/report-7f9 (rank 1) for memory.available<300Mi: usage 100Mi exceeds request 0, priority 0 (effective -1000, priority group batch)\n" +
			"  to free: 50Mi (now); would evict, in order:\n    1. batch/report-7f9, freeing 100Mi (350Mi available after)\n",
		"usage 100Mi exceeds request 0, priority 0 (effective -1000, priority group batch)",
		"opt-out: annotation evictd.io/evict=false",
		"shop/cart-5, freeing an unknown amount (no usage figure): evictd waits until it is gone and looks again",
		"pid.available: 31568 available of 32768\n  threshold pid.available<10%: not met\n  evictd has nothing to do: no threshold met\n  nothing to free; the first to go would be:\n",
		"40 processes, priority 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

func TestExplainCommandErrors(t *testing.T) {
	s, p := td("summary.json"), td("pods.json")
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "no summary", args: []string{"--pods", p}, wantErr: "--summary FILE is required"},
		{name: "no pods", args: []string{"--summary", s}, wantErr: "--pods FILE is required"},
		{name: "stray argument", args: []string{"--summary", s, "--pods", p, "extra"}, wantErr: `unexpected argument "extra"`},
		{name: "bad output", args: []string{"--summary", s, "--pods", p, "-o", "table"}, wantErr: `invalid --output (-o) "table": want text or json`},
		{name: "missing summary file", args: []string{"--summary", filepath.Join(t.TempDir(), "nope.json"), "--pods", p}, wantErr: "nope.json: no such file"},
		{name: "truncated summary", args: []string{"--summary", td("truncated.json"), "--pods", p}, wantErr: "truncated.json: not valid JSON"},
		{name: "summary file as pods", args: []string{"--summary", s, "--pods", s}, wantErr: `no "items"; want a PodList`},
		{name: "bad config", args: []string{"--summary", s, "--pods", p, "--config", td("bad-config.yaml")}, wantErr: `namespace "batch" is already in group "batch"`},
		{name: "unknown signal", args: []string{"--summary", s, "--pods", p, "--signal", "memory"},
			wantErr: `invalid --signal "memory": want one of memory.available, allocatableMemory.available, swap.available, `},
		{name: "containerfs signal", args: []string{"--summary", s, "--pods", p, "--signal", "containerfs.available"},
			wantErr: `invalid --signal "containerfs.available": want one of memory.available, `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runExplain(t, tc.args...)
			if code != exitUsage || out != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, out, exitUsage)
			}
			if !strings.Contains(errOut, tc.wantErr) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr = %q, want one line containing %q", errOut, tc.wantErr)
			}
		})
	}
}

// A running agent's flags and a capture's do not mix, and the token is sent
// only where its receiver can be checked or is the local end of a tunnel.
func TestExplainLiveErrors(t *testing.T) {
	s := td("summary.json")
	dir := t.TempDir()
	tokenKC := writeKubeconfig(t, dir, "token.kubeconfig", &clientcmdapi.AuthInfo{Token: "abc"})
	certKC := writeKubeconfig(t, dir, "cert.kubeconfig", &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")})
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"capture flag with --node", []string{"--node", "n1", "--summary", s}, exitUsage, "--summary is for a capture, not a running agent"},
		{"live flag without --node", []string{"--summary", s, "--kubeconfig", tokenKC}, exitUsage, "--kubeconfig is for a running agent: give --node NODE"},
		{"bad timeout", []string{"--node", "n1", "--request-timeout", "0s"}, exitUsage, "invalid --request-timeout 0s"},
		{"unknown signal", []string{"--node", "n1", "--signal", "ram.available"}, exitUsage, `invalid --signal "ram.available": want one of memory.available, `},
		{"unchecked remote agent", []string{"--node", "n1", "--address", "10.0.0.7:9732", "--kubeconfig", tokenKC}, exitFailure,
			"the agent at 10.0.0.7:9732 serves a certificate evictd cannot check: pass --certificate-authority FILE"},
		{"bad address", []string{"--node", "n1", "--address", "10.0.0.7", "--kubeconfig", tokenKC}, exitFailure, `invalid --address "10.0.0.7"`},
		{"a user without a token", []string{"--node", "n1", "--address", "127.0.0.1:9732", "--kubeconfig", certKC}, exitFailure,
			"the kubeconfig's user has no bearer token"},
		{"missing token file", []string{"--node", "n1", "--address", "127.0.0.1:9732", "--kubeconfig", certKC, "--token-file", filepath.Join(dir, "nope")}, exitFailure,
			"--token-file: stat"},
		{"a CA file without certificates", []string{"--node", "n1", "--address", "10.0.0.7:9732", "--kubeconfig", tokenKC, "--certificate-authority", tokenKC}, exitFailure,
			"no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runExplain(t, tc.args...)
			if code != tc.wantCode || out != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, out, tc.wantCode)
			}
			if !strings.Contains(errOut, tc.wantErr) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr = %q, want one line containing %q", errOut, tc.wantErr)
			}
		})
	}
}

// TestExplainSignal: --signal keeps one signal's explanation, as the whole
// report has it, in JSON and in text, from a capture and from a running
// agent; a known signal evictd has no threshold for says so.
func TestExplainSignal(t *testing.T) {
	s, p := td("summary.json"), td("pods.json")
	report := func(args ...string) explain.Report {
		t.Helper()
		code, out, errOut := runExplain(t, append([]string{"--summary", s, "--pods", p, "-o", "json"}, args...)...)
		if code != exitOK || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		var rep explain.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: output is not the report's JSON: %v\n%s", args, err, out)
		}
		return rep
	}
	all := report()
	var disk explain.Signal
	for _, sig := range all.Signals {
		if sig.Signal == thresholds.NodeFsAvailable {
			disk = sig
		}
	}
	if len(all.Signals) < 2 || disk.Signal == "" {
		t.Fatalf("the fixture's report has %d signals; want nodefs.available among several", len(all.Signals))
	}
	only := report("--signal", "nodefs.available")
	if len(only.Signals) != 1 {
		t.Fatalf("--signal nodefs.available: %d signals; want nodefs.available alone", len(only.Signals))
	}
	// Each run starts its thresholds' episodes at its own now.
	for _, sig := range []*explain.Signal{&disk, &only.Signals[0]} {
		for i := range sig.Thresholds {
			sig.Thresholds[i].Since = nil
		}
	}
	if !reflect.DeepEqual(disk, only.Signals[0]) {
		t.Errorf("--signal nodefs.available's entry differs from the whole report's:\n%+v\nwant\n%+v", only.Signals[0], disk)
	}

	code, out, errOut := runExplain(t, "--summary", s, "--pods", p, "--signal", "nodefs.available")
	if code != exitOK || errOut != "" {
		t.Fatalf("text: exit %d, stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, "nodefs.available: 9Gi available of 100Gi\n") || strings.Contains(out, "memory.available:") || strings.Contains(out, "imagefs.available:") {
		t.Errorf("--signal nodefs.available prints:\n%s\nwant nodefs.available's paragraph alone", out)
	}

	// swap.available is a signal evictd knows; the defaults set no
	// threshold for it.
	if rep := report("--signal", "swap.available"); rep.Signals == nil || len(rep.Signals) != 0 {
		t.Errorf("--signal swap.available -o json: %#v; want an empty list of signals", rep.Signals)
	}
	code, out, errOut = runExplain(t, "--summary", s, "--pods", p, "--signal", "swap.available")
	if want := "swap.available: evictd has no threshold for this signal, so it never acts on it\n"; code != exitOK || errOut != "" || out != want {
		t.Errorf("--signal swap.available: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, want)
	}

	// A running agent's explanation is narrowed the same way: the agent
	// here serves the capture's report, as its /explain would.
	live := agent.Live{Node: "n1", ObservedAt: time.Date(2026, 11, 25, 21, 40, 2, 0, time.UTC), Report: all}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/explain" || r.Header.Get("Authorization") != "Bearer abc" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(live)
	}))
	defer srv.Close()
	kc := writeKubeconfig(t, t.TempDir(), "token.kubeconfig", &clientcmdapi.AuthInfo{Token: "abc"})
	addr := strings.TrimPrefix(srv.URL, "https://")
	code, out, errOut = runExplain(t, "--node", "n1", "--address", addr, "--kubeconfig", kc, "--signal", "nodefs.available", "-o", "json")
	if code != exitOK || errOut != "" {
		t.Fatalf("--node n1 --signal nodefs.available: exit %d, stderr %q", code, errOut)
	}
	var got agent.Live
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--node: output is not the agent's JSON: %v\n%s", err, out)
	}
	if got.Node != "n1" || len(got.Signals) != 1 || got.Signals[0].Signal != thresholds.NodeFsAvailable {
		t.Errorf("--node n1 --signal nodefs.available -o json: node %q, %d signals; want n1 and nodefs.available alone", got.Node, len(got.Signals))
	}
	code, out, errOut = runExplain(t, "--node", "n1", "--address", addr, "--kubeconfig", kc, "--signal", "nodefs.available")
	if code != exitOK || errOut != "" || !strings.HasPrefix(out, "node n1, observed at 2026-11-25T21:40:02Z\n\nnodefs.available: 9Gi available of 100Gi\n") ||
		strings.Contains(out, "memory.available:") {
		t.Errorf("--node n1 --signal nodefs.available: exit %d, stderr %q, stdout:\n%s\nwant the agent's header and nodefs.available's paragraph alone", code, errOut, out)
	}
}

func writeKubeconfig(t *testing.T, dir, name string, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.AuthInfos["u"] = user
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(dir, name)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
