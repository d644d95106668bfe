// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// stallSummary is the rank fixture's Summary with memory PSI on some pods
// (avg10, in percent, as the kubelet's Summary carries it) and swap on one.
func stallSummary(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(td("summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s statsapi.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	stalls := map[string]float64{"web-2": 55.5, "report-7f9": 12, "db-0": 1.5, "etcd-node-1": 90}
	for i := range s.Pods {
		p := &s.Pods[i]
		if avg, ok := stalls[p.PodRef.Name]; ok && p.Memory != nil {
			p.Memory.PSI = &statsapi.PSIStats{Some: statsapi.PSIData{Avg10: avg}, Full: statsapi.PSIData{Avg10: avg / 4}}
		}
		if p.PodRef.Name == "report-7f9" {
			swap := uint64(300 << 20)
			p.Swap = &statsapi.SwapStats{SwapUsageBytes: &swap}
		}
	}
	out, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "summary.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRankCommandStall(t *testing.T) {
	summary := stallSummary(t)
	code, out, errOut := runRank(t, "--summary", summary, "--pods", td("pods.json"), "--signal", "memory.pressureSome", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Signal     string `json:"signal"`
		Candidates []struct {
			Name       string  `json:"name"`
			Eligible   bool    `json:"eligible"`
			SkipReason string  `json:"skipReason"`
			Stall      float64 `json:"stall"`
			Stalling   bool    `json:"stalling"`
			Swap       int64   `json:"swap"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var eligible []string
	for _, c := range res.Candidates {
		if c.Eligible {
			eligible = append(eligible, c.Name)
		}
	}
	// report-7f9: 100Mi + 300Mi swap over its request; web-2 within it.
	if strings.Join(eligible, ",") != "report-7f9,web-2" {
		t.Errorf("eligible %v, want report-7f9 then web-2 (the stalling ones, memory order)", eligible)
	}
	for _, c := range res.Candidates {
		switch c.Name {
		case "db-0":
			if c.Eligible || !strings.Contains(c.SkipReason, "not-stalling: its own memory stall 1.5% is under 5.0%") {
				t.Errorf("db-0: eligible %v, skip %q", c.Eligible, c.SkipReason)
			}
		case "etcd-node-1":
			if c.Eligible || !c.Stalling {
				t.Errorf("etcd-node-1 (static, stalling) eligible %v stalling %v: protected pods stay protected", c.Eligible, c.Stalling)
			}
		case "report-7f9":
			if c.Swap != 300<<20 || c.Stall != 0.12 {
				t.Errorf("report-7f9: swap %d stall %v", c.Swap, c.Stall)
			}
		}
	}

	code, out, errOut = runRank(t, "--summary", summary, "--pods", td("pods.json"), "--signal", "memory.pressureSome")
	if code != exitOK {
		t.Fatalf("table: exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	for _, col := range []string{"SWAP", "OWN STALL"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header %q lacks %s", lines[0], col)
		}
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[1] != "batch/report-7f9" || f[5] != "300Mi" || f[6] != "12.0%" {
		t.Errorf("first row %q, want batch/report-7f9 with 300Mi of swap and 12.0%% stall", lines[1])
	}
}
