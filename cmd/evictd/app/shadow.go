// SPDX-License-Identifier: Apache-2.0

package app

import (
	"net/http"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/shadow"
)

// newShadow builds shadow mode's recorder (--shadow); nil when off. Each
// episode's report is a log line: the kubelet's evictions beside what
// evictd would have done, what an operator reads before enforcing.
func newShadow(o *options.Options, log *zap.Logger) *shadow.Recorder {
	if !o.Shadow {
		return nil
	}
	vmstat := filepath.Join(o.HostRoot, "proc", "vmstat")
	return shadow.NewRecorder(func() (int64, error) { return shadow.VMStatOOMKills(vmstat) }, func(r shadow.Report) {
		log.Info("shadow report", zap.String("resource", r.Resource), zap.Time("start", r.Start), zap.Time("end", r.End),
			zap.Any("wouldEvict", r.WouldEvict), zap.Any("kubeletEvicted", r.KubeletEvicted), zap.Int64("oomKills", r.OOMKills),
			zap.Strings("both", r.Both), zap.Strings("evictdOnly", r.EvictdOnly), zap.Strings("kubeletOnly", r.KubeletOnly),
			zap.Bool("sameOrder", r.SameOrder), zap.Duration("lead", r.Lead), zap.Bool("hasLead", r.HasLead), zap.String("summary", r.Summary))
	})
}

// shadowHandler serves the last reports as JSON, oldest first (GET /shadow).
func shadowHandler(r *shadow.Recorder) http.Handler {
	return agent.JSONHandler("the reports", func() any { return map[string][]shadow.Report{"reports": r.Reports()} })
}
