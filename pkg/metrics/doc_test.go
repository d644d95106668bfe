// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/golden"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

// docPath is the metrics' one table; the README links to it.
const docPath = "../../docs/metrics.md"

// resultHelp explains each value of the result label in the doc.
var resultHelp = map[string]string{
	ResultEvicted:          "the API server accepted the eviction (HTTP 201)",
	ResultDryRun:           "`--dry-run`: the server-side dry-run eviction was allowed; nothing was changed",
	ResultPDBBlocked:       "a PodDisruptionBudget refused it (HTTP 429); in dry run, it would have",
	ResultNotFound:         "the pod was already gone (HTTP 404, or its UID changed); not an error",
	ResultError:            "any other failure, after bounded retries with backoff: the API server down or overloaded, a timeout, admission not yet ready right after an API server start (403 `not yet ready to handle request`), evictd's own credentials or RBAC (401, a 403 of the authorizer); the episode backs off before its next call",
	ResultRateLimited:      "held back by the episode's rate limit (`--eviction-rate`, `--eviction-burst`, per pressure episode) or its cap; no API call was made",
	ResultForcedDelete:     "`--pdb-policy=best-effort`: a PDB-blocked pod was deleted anyway under a hard threshold",
	ResultResponderEvicted: "`--eviction-request`: an eviction responder evicted the pod, acting on evictd's EvictionRequest (docs/evictionrequest.md); evictd made no eviction call. Counted once, when the pod is terminating or gone; a pod evictd evicts itself after the responder wait counts as `evicted` only",
	ResultRefused:          "the API server refused this pod's eviction for the pod itself: an admission policy or webhook denied it (HTTP 403, 422, 400, or a webhook's 429) or more than one PodDisruptionBudget covers it (HTTP 500); evictd evicts the next candidate at once and asks about this pod again after 2 minutes; in dry run, it would have been refused",
	ResultWebhookFailed:    "an admission webhook with `failurePolicy: Fail` that selects this pod could not be called (its backend down or too slow, or an answer the API server could not read: HTTP 500 `failed calling webhook \"NAME\"`); the webhook's state, for the pods it selects, not the API server's: evictd evicts the next candidate at once and asks about this pod again after 30 s; in dry run, the dry-run eviction failed so",
}

// TestMetricsDoc keeps docs/metrics.md equal to what the registry holds.
// Run `go test ./pkg/metrics -run TestMetricsDoc -update` after changing a
// metric.
func TestMetricsDoc(t *testing.T) {
	golden.Check(t, docPath, renderDoc(t), "go test ./pkg/metrics -run TestMetricsDoc -update")
}

func TestResultHelpCoversEveryResult(t *testing.T) {
	if len(resultHelp) != len(EvictionResults) {
		t.Errorf("resultHelp has %d entries, EvictionResults %d", len(resultHelp), len(EvictionResults))
	}
	for _, r := range EvictionResults {
		if resultHelp[r] == "" {
			t.Errorf("result %q has no description for the doc", r)
		}
	}
}

func renderDoc(t *testing.T) []byte {
	t.Helper()
	m := populated(t)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}

	// Every evictd_* collector must show up in the gathered output, or a new
	// family would silently be left out of the doc.
	descs := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range m.own {
			c.Describe(descs)
		}
		close(descs)
	}()
	nDesc := 0
	for range descs {
		nDesc++
	}

	var b bytes.Buffer
	b.WriteString("# evictd metrics\n\n")
	b.WriteString("<!-- Generated from the registry by `go test ./pkg/metrics -run TestMetricsDoc -update`; a test fails when this file and the code differ. -->\n\n")
	b.WriteString("`evictd run` serves these on `/metrics` (a private registry, next to `/healthz` and `/readyz`).\n")
	b.WriteString("Names follow `evictd_<subsystem>_<name>_<unit>` in base units; no metric has a pod-name label.\n\n")
	b.WriteString("| Metric | Type | Labels | Help |\n|---|---|---|---|\n")
	nOwn := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), namespace+"_") {
			continue
		}
		nOwn++
		labels := map[string]bool{}
		for _, mm := range mf.GetMetric() {
			for _, lp := range mm.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		names := make([]string, 0, len(labels))
		for l := range labels {
			names = append(names, "`"+l+"`")
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", mf.GetName(), strings.ToLower(mf.GetType().String()),
			strings.Join(names, ", "), strings.ReplaceAll(mf.GetHelp(), "|", `\|`))
	}
	if nOwn != nDesc {
		t.Fatalf("gathered %d evictd_ families but %d are registered: populated() must give every family a series", nOwn, nDesc)
	}

	b.WriteString("\n## Label values\n\n")
	b.WriteString("- `signal`: the kubelet's eviction signal names: ")
	var sigs []string
	for _, s := range thresholds.Signals() {
		sigs = append(sigs, "`"+string(s)+"`")
	}
	b.WriteString(strings.Join(sigs, ", ") + ".\n")
	b.WriteString("  Signals measured in bytes go to `evictd_signal_available_bytes` and `evictd_signal_capacity_bytes`;\n")
	b.WriteString("  counts (free inodes, PIDs) go to `evictd_signal_available` and `evictd_signal_capacity`.\n")
	b.WriteString("- `kind`: `" + KindHard + "` or `" + KindSoft + "`.\n")
	b.WriteString("- `result` of `evictd_evictions_total`:\n")
	for _, r := range EvictionResults {
		fmt.Fprintf(&b, "  - `%s`: %s.\n", r, resultHelp[r])
	}
	var srcs []string
	for _, s := range wakeup.AllSources() {
		srcs = append(srcs, "`"+string(s)+"`")
	}
	b.WriteString("- `source`: the wake-up source that woke the agent loop, or that is armed: " + strings.Join(srcs, ", ") + ".\n")
	b.WriteString("\nThe standard Go runtime (`go_*`) and process (`process_*`) collectors are registered too.\n")
	return b.Bytes()
}

// TestSignalReadError: each signal an observation could not measure counts
// in evictd_observation_signal_errors_total under its name, and every known
// signal has its zero series from InitSignals before its first error.
func TestSignalReadError(t *testing.T) {
	m, err := New(buildinfo.Info{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	m.InitSignals(thresholds.Signals()...)
	if n := testutil.CollectAndCount(m.Registry(), "evictd_observation_signal_errors_total"); n != len(thresholds.Signals()) {
		t.Errorf("%d signal error series after InitSignals; want one per signal, %d", n, len(thresholds.Signals()))
	}
	m.SignalReadError(string(thresholds.PIDAvailable))
	m.SignalReadError(string(thresholds.PIDAvailable))
	m.SignalReadError(string(thresholds.NodeFsAvailable))
	for sig, want := range map[thresholds.Signal]float64{thresholds.PIDAvailable: 2, thresholds.NodeFsAvailable: 1, thresholds.MemoryAvailable: 0} {
		if got := testutil.ToFloat64(m.signalErrors.WithLabelValues(string(sig))); got != want {
			t.Errorf("signal errors of %s = %v; want %v", sig, got, want)
		}
	}
	var none *Metrics
	none.SignalReadError("memory.available") // a nil *Metrics does nothing
}
