// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/feature"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Withdrawer is an Evictor that holds requests to withdraw when their
// pressure episode ends (*evictreq.Evictor, --eviction-request).
type Withdrawer interface {
	EpisodeEnded(ctx context.Context, ended func(thresholds.Signal) bool)
}

// withdrawTimeout bounds the withdrawals of one ended episode: past it the
// requests stay, and a responder may still evict a pod no longer needed to go.
const withdrawTimeout = 30 * time.Second

// trackEpisodes starts and ends the resources' pressure episodes from the
// pass's threshold state, and leaves the trail: log lines, the pressure
// metric, Events on the Node.
func (l *Loop) trackEpisodes(v *view) {
	pressure := map[episode.Resource]bool{}
	for _, th := range v.status.Met {
		pressure[episode.Of(th.Signal)] = true
	}
	for _, p := range v.status.Pending {
		pressure[episode.Of(p.Signal)] = true
	}
	for _, a := range v.status.Active {
		pressure[episode.Of(a.Signal)] = true
	}
	for _, t := range v.targets {
		pressure[episode.Of(t.Threshold.Signal)] = true
	}
	started, ended := l.episodes.Update(v.now, pressure)
	told := feature.Episodes{Now: v.now}
	for _, ep := range started {
		ep.ObservedFrom = v.obs.Time
		l.deps.Metrics.SetPressure(string(ep.Resource), true)
		told.Started = append(told.Started, featureEpisode(ep))
		l.episodeStarted(ep, v)
	}
	for _, ep := range ended {
		l.deps.Metrics.SetPressure(string(ep.Resource), false)
		l.deps.Metrics.SetEpisodeCapReached(string(ep.Resource), false)
		inEpisode := func(s thresholds.Signal) bool { return episode.Of(s) == ep.Resource }
		l.inflight.EndEpisode(inEpisode)
		if ep.Busy(episode.Soft) || ep.Busy(episode.Hard) {
			l.held.ended = append(l.held.ended, ep)
		}
		if w, ok := l.deps.Evictor.(Withdrawer); ok {
			// Off the loop: a withdrawal is an API call or two per pod.
			l.deps.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), withdrawTimeout)
				defer cancel()
				w.EpisodeEnded(ctx, inEpisode)
			})
		}
		told.Ended = append(told.Ended, featureEpisode(ep))
		lasted := v.now.Sub(ep.Start)
		l.deps.Log.Info("pressure episode ended", zap.String("resource", string(ep.Resource)),
			zap.Duration("lasted", lasted), zap.Int("evictions", ep.Evictions), zap.Duration("transitionPeriod", l.cfg.TransitionPeriod))
		l.deps.Evictor.PressureEnded(fmt.Sprintf("%s pressure ended: no %s threshold met for %s (pressure transition period); %d pod(s) evicted in the episode, which lasted %s.",
			ep.Resource, ep.Resource, l.cfg.TransitionPeriod, ep.Evictions, lasted.Round(1e9)))
	}
	for _, ep := range l.episodes.All() {
		l.noteThresholds(ep, v)
		told.Open = append(told.Open, featureEpisode(ep))
	}
	l.features.Episodes(told)
}

func featureEpisode(ep *episode.Episode) feature.Episode {
	return feature.Episode{Resource: string(ep.Resource), Start: ep.Start}
}

func (l *Loop) episodeStarted(ep *episode.Episode, v *view) {
	fields := []zap.Field{zap.String("resource", string(ep.Resource))}
	for _, t := range v.targets {
		if episode.Of(t.Threshold.Signal) == ep.Resource {
			fields = append(fields, zap.String("signal", string(t.Threshold.Signal)), zap.String("threshold", t.Threshold.String()),
				zap.Int64("available", t.Observation.Available), zap.Bool("predicted", t.Early))
			break
		}
	}
	l.deps.Log.Info("pressure episode started", fields...)
}

// noteThresholds leaves an Event on the Node the first time each threshold
// of the episode's resource is met in the episode.
func (l *Loop) noteThresholds(ep *episode.Episode, v *view) {
	for _, th := range v.status.Met {
		if episode.Of(th.Signal) != ep.Resource {
			continue
		}
		k := th.String()
		if ep.ThresholdsNoted[k] {
			continue
		}
		ep.ThresholdsNoted[k] = true
		o := v.signals[th.Signal]
		amount := th.Value.Amount(o.Capacity)
		l.deps.Log.Info("threshold met", zap.String("resource", string(ep.Resource)), zap.String("signal", string(th.Signal)),
			zap.String("threshold", th.String()), zap.Bool("hard", th.Hard()), zap.Int64("available", o.Available),
			zap.Int64("thresholdAmount", amount), zap.String("wokenBy", wokenBy(v.woke)))
		l.deps.Evictor.NodeThresholdMet(th.Signal, th.Hard(), noteAmount(th.Signal, amount, o.Capacity), noteAmount(th.Signal, o.Available, o.Capacity))
	}
}

// noteAmount is a threshold's figure in the unit Events and evict.Request
// carry: the signal's own, but for a stall signal, whose observation counts
// µs of the window not stalled, the millionths of the window stalled.
func noteAmount(s thresholds.Signal, v, capacity int64) int64 {
	if s.Stall() {
		return evict.StallPPM(v, capacity)
	}
	return v
}

// wokenBy names the wake-up that found a threshold met, as "psi/kubepods"
// or "poll": how fast it was noticed depends on it.
func wokenBy(w wakeup.Wakeup) string {
	if w.Name == "" {
		return string(w.Source)
	}
	return string(w.Source) + "/" + w.Name
}
