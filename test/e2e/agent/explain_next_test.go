// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"slices"
	"strings"
	"testing"
)

// explainedFlag has the agent log, each time it changes, what its
// explanation (the one GET /explain serves) says it does next: the
// "explained" debug line, which checkExplainedNext holds its calls against.
const explainedFlag = "--log-level=debug"

// checkExplainedNext holds each eviction call e's agent made (each line of
// the evictor's with a result: evicted, refused, blocked, a dry run's
// would-be) against the last explanation the agent published before it in
// which the pod was not yet on its way out: that explanation named the pod
// as the next to go for the call's signal, or named a pod whose call,
// refused, came just before in the same pass (the agent moves past a
// refusal at once; no explanation can foresee it). It returns the
// explanations the agent logged while a pod was on its way out and it
// waited, each as "signal: why".
func checkExplainedNext(t *testing.T, e *evictd) (waits []string) {
	t.Helper()
	lines := e.logs()
	var explained []int
	calls := 0
	for i, l := range lines {
		if l.Msg == "explained" {
			explained = append(explained, i)
			if len(strs(l, "held")) > 0 {
				waits = append(waits, strs(l, "waits")...)
			}
			continue
		}
		if l.Str("result") == "" || l.Pod == "" || l.Signal == "" {
			continue
		}
		calls++
		named, at := "", -1
		for j := len(explained) - 1; j >= 0; j-- {
			x := lines[explained[j]]
			if slices.Contains(strs(x, "held"), l.Pod) {
				continue
			}
			for _, n := range strs(x, "next") {
				if s, pod, ok := strings.Cut(n, "="); ok && s == l.Signal {
					named = pod
				}
			}
			at = explained[j]
			break
		}
		switch {
		case at < 0:
			t.Errorf("%s's call (%s, %s): no explanation logged before it", l.Pod, l.Signal, l.Msg)
		case named == l.Pod:
		case slices.ContainsFunc(lines[at:i], func(c logEntry) bool {
			return c.Pod == named && c.Str("result") != "" && c.Str("result") != "evicted"
		}):
			// The named pod's call was refused in this pass; the next went.
		default:
			t.Errorf("%s's call (%s, %s at %s): the explanation before it named %q as the next to go:\n%s",
				l.Pod, l.Signal, l.Msg, l.TS.Format("15:04:05.000"), named, lines[at].Raw)
		}
	}
	if calls == 0 {
		t.Errorf("no eviction call in the agent's log to hold against its explanation")
	}
	t.Logf("%d eviction calls held against the explanation before each; %d waits explained while a pod was on its way out", calls, len(waits))
	return waits
}

// strs is a string-list field of a log entry.
func strs(l logEntry, key string) []string {
	var out []string
	v, _ := l.Fields[key].([]any)
	for _, s := range v {
		if s, ok := s.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
