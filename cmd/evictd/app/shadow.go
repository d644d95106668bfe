// SPDX-License-Identifier: Apache-2.0

package app

import (
	"net/http"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/shadow"
)

// newShadow builds shadow mode's recorder (--shadow); nil when off. Each
// episode's report is a log line: the kubelet's evictions beside what
// evictd would have done, what an operator reads before enforcing. The
// same evidence, counted, is in m (evictd_shadow_*), for a fleet.
func newShadow(o *options.Options, m *metrics.Metrics, log *zap.Logger) *shadow.Recorder {
	if !o.Shadow {
		return nil
	}
	vmstat := filepath.Join(o.HostRoot, "proc", "vmstat")
	rec := shadow.NewRecorder(func() (int64, error) { return shadow.VMStatOOMKills(vmstat) }, func(r shadow.Report) {
		log.Info("shadow report", zap.String("resource", r.Resource), zap.Time("start", r.Start), zap.Time("end", r.End),
			zap.Any("wouldEvict", r.WouldEvict), zap.Any("kubeletEvicted", r.KubeletEvicted), zap.Int64("oomKills", r.OOMKills),
			zap.Strings("both", r.Both), zap.Strings("evictdOnly", r.EvictdOnly), zap.Strings("kubeletOnly", r.KubeletOnly),
			zap.Bool("sameOrder", r.SameOrder), zap.Duration("lead", r.Lead), zap.Bool("hasLead", r.HasLead),
			zap.String("first", r.First), zap.String("summary", r.Summary))
	})
	m.InitShadow(shadowSeries(o))
	rec.CountInto(m)
	return rec
}

// shadowSeries are the series shadow mode's metrics start with: those of
// the signals with a threshold and of their episodes.
func shadowSeries(o *options.Options) metrics.ShadowSeries {
	s := metrics.ShadowSeries{Signals: map[string]string{}, KubeletResources: shadow.KubeletResources, Firsts: shadow.Firsts,
		Episodes: []string{shadow.OOMOutsideEpisodes}}
	resources := map[episode.Resource]bool{}
	for _, th := range o.Thresholds() {
		r := episode.Of(th.Signal)
		s.Signals[string(th.Signal)] = string(r)
		resources[r] = true
	}
	for _, r := range episode.Resources() {
		if resources[r] {
			s.Resources = append(s.Resources, string(r))
			s.Episodes = append(s.Episodes, string(r))
		}
	}
	return s
}

// shadowHandler serves the last reports as JSON, oldest first (GET /shadow).
func shadowHandler(r *shadow.Recorder) http.Handler {
	return agent.JSONHandler("the reports", func() any { return map[string][]shadow.Report{"reports": r.Reports()} })
}
