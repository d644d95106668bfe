// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/pkg/explain"
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
