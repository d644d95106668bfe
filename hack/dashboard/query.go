// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// Series is one line of a panel: its legend and its points (unix ms).
type Series struct {
	Legend string
	T      []int64
	V      []float64
}

// Window is the time range and step every panel is evaluated over, as
// Grafana would for one picture.
type Window struct {
	Start, End time.Time
	Step       time.Duration
}

// Evaluator runs a panel's queries with Prometheus's own engine.
type Evaluator struct {
	engine *promql.Engine
	store  storage.Queryable
	window Window
}

// NewEvaluator evaluates over store. A series is looked back at for five
// steps: long enough to bridge a late scrape, short enough that a series
// that ended is not drawn on.
func NewEvaluator(store storage.Queryable, w Window) *Evaluator {
	return &Evaluator{
		engine: promql.NewEngine(promql.EngineOpts{
			MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * w.Step,
		}),
		store: store, window: w,
	}
}

// Panel evaluates every target of p. A query Prometheus refuses is an
// error naming the panel and the query: a picture must not hide it.
func (e *Evaluator) Panel(ctx context.Context, p Panel) ([]Series, error) {
	var out []Series
	for _, t := range p.Targets {
		expr := Expand(t.Expr, e.window.Step)
		q, err := e.engine.NewRangeQuery(ctx, e.store, nil, expr, e.window.Start, e.window.End, e.window.Step)
		if err != nil {
			return nil, fmt.Errorf("panel %q: query %q: %w", p.Title, t.Expr, err)
		}
		res := q.Exec(ctx)
		if res.Err != nil {
			q.Close()
			return nil, fmt.Errorf("panel %q: query %q: %w", p.Title, t.Expr, res.Err)
		}
		m, err := res.Matrix()
		if err != nil {
			q.Close()
			return nil, fmt.Errorf("panel %q: query %q: %w", p.Title, t.Expr, err)
		}
		var group []Series
		for _, s := range m {
			lbls := s.Metric.Map()
			line := Series{Legend: Legend(t.LegendFormat, lbls)}
			for _, pt := range s.Floats {
				if math.IsNaN(pt.F) || math.IsInf(pt.F, 0) {
					continue
				}
				line.T = append(line.T, pt.T)
				line.V = append(line.V, pt.F)
			}
			if len(line.T) > 0 {
				group = append(group, line)
			}
		}
		q.Close()
		sort.Slice(group, func(i, j int) bool { return group[i].Legend < group[j].Legend })
		out = append(out, group...)
	}
	return out, nil
}

// Stack adds each series onto the ones before it at the same timestamps,
// as Grafana's "normal" stacking draws them.
func Stack(series []Series) []Series {
	below := map[int64]float64{}
	out := make([]Series, len(series))
	for i, s := range series {
		n := Series{Legend: s.Legend, T: append([]int64(nil), s.T...), V: make([]float64, len(s.V))}
		for k, t := range s.T {
			n.V[k] = below[t] + s.V[k]
			below[t] = n.V[k]
		}
		out[i] = n
	}
	return out
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }
