// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Capture is a node captured to files (evictd explain --summary --pods):
// one observation and the pods, and the configuration to judge them with.
type Capture struct {
	Config *config.Config
	// Rank are the ranking options: the configuration's, with the
	// capture's namespace labels and measured disk parts.
	Rank        rank.Options
	Observation *pressure.Observation
	Pods        []*v1.Pod
}

// ExplainCapture explains a capture as the agent's first pass over it
// decides: a loop of the agent's own, on the capture's clock, observes it,
// assesses it and explains what it would do first, through the same plan
// a running agent acts on. It does not act. One observation holds no
// history: a soft threshold met has held for no time yet, no fill rate is
// known (no act-early), and the memory.high family, which reads the
// containers' own files, is left out.
func ExplainCapture(c Capture) (Live, error) {
	if c.Observation == nil || c.Observation.Summary == nil {
		return Live{}, errors.New("explain: the capture holds no observation")
	}
	o := options.NewOptions()
	o.Config = c.Config
	ths := slices.DeleteFunc(o.Thresholds(), func(th thresholds.Threshold) bool { return th.Signal == thresholds.MemoryHighStuck })
	lc := ConfigFor(o, ths, c.Rank)
	lc.MemoryHigh = memhigh.Thresholds{}
	m, err := metrics.New(buildinfo.Info{})
	if err != nil {
		return Live{}, err
	}
	at := c.Observation.Time
	if at.IsZero() {
		at = time.Now() // a kubelet Summary: its figures carry their own times
	}
	captured := *c.Observation
	captured.Time = at
	src := &captureSource{obs: &captured, pods: c.Pods, labels: c.Rank.NamespaceLabels, classes: c.Rank.PriorityClasses}
	l, err := NewLoop(lc, Deps{Observer: src, Waker: src, Pods: src, Evictor: src, Metrics: m, Clock: testclock.NewFakeClock(at)})
	if err != nil {
		return Live{}, err
	}
	obs, ok := l.observe(context.Background(), true)
	if !ok {
		return Live{}, errors.New("explain: the capture's observation cannot be read")
	}
	l.publishExplanation(l.assess(obs, wakeup.Wakeup{Source: wakeup.SourcePoll, At: at}))
	return l.Explain("", false), nil
}

// captureSource is a capture as the loop's observer, waker, pod source and
// evictor: it observes the capture and never evicts (the explaining loop
// does not act).
type captureSource struct {
	obs     *pressure.Observation
	pods    []*v1.Pod
	labels  map[string]map[string]string
	classes map[string]int32
}

func (c *captureSource) Observe(context.Context) (*pressure.Observation, error) { return c.obs, nil }
func (c *captureSource) Wait(context.Context, time.Duration) (wakeup.Wakeup, error) {
	return wakeup.Wakeup{}, errors.New("explain: a capture is one pass")
}
func (c *captureSource) Kick(string)                                            {}
func (c *captureSource) Pods() []*v1.Pod                                        { return c.pods }
func (c *captureSource) PriorityClasses() map[string]int32                      { return c.classes }
func (c *captureSource) NamespaceLabels() map[string]map[string]string          { return c.labels }
func (c *captureSource) Node() *v1.Node                                         { return nil }
func (c *captureSource) NewBudget() *evict.Budget                               { return new(evict.Budget) }
func (c *captureSource) NodeThresholdMet(thresholds.Signal, bool, int64, int64) {}
func (c *captureSource) PressureEnded(string)                                   {}
func (c *captureSource) VictimStuck(string, string, types.UID, string)          {}

func (c *captureSource) Evict(context.Context, evict.Request) (evict.Outcome, error) {
	return evict.Outcome{}, errors.New("explain: a capture is not evicted from")
}

func (c *captureSource) ForceDelete(context.Context, evict.Request) (evict.Outcome, error) {
	return evict.Outcome{}, errors.New("explain: a capture is not evicted from")
}
