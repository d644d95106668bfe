// SPDX-License-Identifier: Apache-2.0

// Package metrictest reads one series of a registry, for tests.
//
// A series that is not there is an error, never a 0: a test that wants a
// counter at 0 must not pass because the metric was renamed or a label
// changed. Counters whose label values are a closed set are created at 0 up
// front (pkg/metrics), so their series exist before the first event; a test
// that means "no such series" says so with Absent.
package metrictest

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value is the value of the one series of family name whose labels include
// labels: a counter's, a gauge's or an untyped metric's. The test fails at
// once (t.Fatal) when the family is not gathered, when no series or more
// than one matches, or when the family is a histogram or a summary; the
// message names the family and the labels and lists the series there are.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, err := Lookup(g, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Absent fails the test (t.Errorf) when family name has a series whose
// labels include labels. A family with no series at all is not gathered, so
// Absent cannot tell a renamed family from an empty one: pair it with a
// Value of a series that must exist where that matters.
func Absent(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) {
	t.Helper()
	mf, err := family(g, name)
	if err != nil {
		if _, missing := err.(missingFamilyError); missing {
			return
		}
		t.Fatal(err)
	}
	if found := matching(mf, labels); len(found) > 0 {
		t.Errorf("%s: want no series with labels %s, have %s", name, Selector(labels), seriesList(name, found))
	}
}

// Lookup is Value without the testing.TB: the value, or an error saying why
// there is none.
func Lookup(g prometheus.Gatherer, name string, labels map[string]string) (float64, error) {
	mf, err := family(g, name)
	if err != nil {
		return 0, err
	}
	found := matching(mf, labels)
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("%s: no series with labels %s; its series: %s", name, Selector(labels), seriesList(name, mf.GetMetric()))
	case 1:
	default:
		return 0, fmt.Errorf("%s: %d series with labels %s, want one: %s", name, len(found), Selector(labels), seriesList(name, found))
	}
	m := found[0]
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), nil
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), nil
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue(), nil
	}
	return 0, fmt.Errorf("%s is a %s, not a counter or a gauge", name, strings.ToLower(mf.GetType().String()))
}

type missingFamilyError struct {
	name     string
	families []string
}

func (e missingFamilyError) Error() string {
	// The families of the same namespace (up to its first "_") are the
	// likely rename; the rest (go_, process_) would only be noise.
	prefix, _, _ := strings.Cut(e.name, "_")
	var near []string
	for _, f := range e.families {
		if strings.HasPrefix(f, prefix+"_") {
			near = append(near, f)
		}
	}
	if len(near) == 0 {
		return fmt.Sprintf("no metric family %s gathered (%d families, none named %s_*)", e.name, len(e.families), prefix)
	}
	return fmt.Sprintf("no metric family %s gathered; the %s_* families: %s", e.name, prefix, strings.Join(near, ", "))
}

func family(g prometheus.Gatherer, name string) (*dto.MetricFamily, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	var names []string
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf, nil
		}
		names = append(names, mf.GetName())
	}
	sort.Strings(names)
	return nil, missingFamilyError{name: name, families: names}
}

// matching lists the series of mf whose labels include labels.
func matching(mf *dto.MetricFamily, labels map[string]string) []*dto.Metric {
	var found []*dto.Metric
series:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v { // as in PromQL, a label "" is an absent one
				continue series
			}
		}
		found = append(found, m)
	}
	return found
}

// Selector writes labels as a selector, {a="1",b="2"} sorted by name, for
// the messages of metric readers.
func Selector(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func seriesList(name string, ms []*dto.Metric) string {
	if len(ms) == 0 {
		return "none"
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[i] = name + Selector(labels)
	}
	return strings.Join(out, " ")
}

// Count is how many observations the one series of histogram name whose
// labels include labels holds. The test fails at once when the family is
// not gathered or not a histogram, or when no series or more than one
// matches.
func Count(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) uint64 {
	t.Helper()
	mf, err := family(g, name)
	if err != nil {
		t.Fatal(err)
	}
	if mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s is a %s, not a histogram", name, strings.ToLower(mf.GetType().String()))
	}
	found := matching(mf, labels)
	if len(found) != 1 {
		t.Fatalf("%s: %d series with labels %s, want one: %s", name, len(found), Selector(labels), seriesList(name, mf.GetMetric()))
	}
	return found[0].GetHistogram().GetSampleCount()
}
