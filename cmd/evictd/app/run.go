// SPDX-License-Identifier: Apache-2.0

// Package app is `evictd run`'s wiring: it builds the agent from one
// validated Options (pkg/options) — the node side (observer, placement
// above the kubelet's, wake-up sources), the API side (informers,
// evictor, Events, the node lease and brake), the loop (pkg/agent) and
// its servers — runs it, and takes it down in one written order
// (shutdown.go).
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/cmd/evictd/app/sandbox"
	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/agent/podwatch"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/memlock"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Timing constants of the wiring.
const (
	// eventFlushTimeout bounds how long shutdown waits for queued Events.
	eventFlushTimeout = 5 * time.Second
	// leftoverTimeout bounds the start-up search for the EvictionRequests
	// an earlier evictd left open (--eviction-request).
	leftoverTimeout = time.Minute
)

// Run builds everything from validated options and runs the agent until ctx
// ends; then it stops in the order stopOrder writes down: the loop (its
// eviction calls under way answer), the node brake lifted, the lease
// released, the informers, and serving last. build labels
// evictd_build_info. Errors that are the operator's to fix wrap
// options.ErrUsage.
func Run(ctx context.Context, o *options.Options, log *zap.Logger, build buildinfo.Info) error {
	if err := o.Validate(); err != nil {
		return err
	}
	// First, so that what follows is locked too (MCL_FUTURE covers it
	// anyway; the sooner, the fewer pages are dropped before it).
	lock := memlock.Lock(o.LockMemory, memlock.LockAll)
	if lock.Locked {
		// The lock lasts as long as the agent: a caller in the same
		// process (a test) gets its memory back unlocked.
		defer func() { _ = memlock.UnlockAll() }()
	}
	// Before anything reads the host or starts a goroutine that does: from
	// here on no thread of the process can open a file by its handle.
	box, err := sandbox.Enter(sandbox.Kind(o.Sandbox))
	if err != nil {
		return fmt.Errorf("--%s=%s: %w (evictd does not run without the sandbox it was asked for; --%s=%s turns it off)",
			options.FlagSandbox, o.Sandbox, err, options.FlagSandbox, options.SandboxNone)
	}
	clk := clock.RealClock{}
	// pkg/evict names the node in its own lines; everything else gets it here.
	evictLog := log.Named("evict")
	log = log.With(zap.String("node", o.NodeName))

	restCfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("%w: %w", options.ErrUsage, err)
	}
	restCfg.UserAgent = "evictd/" + build.Version
	m, err := newMetrics(o, build)
	if err != nil {
		return err
	}
	// Every request the agent sends, its informers' watches included, is
	// counted in evictd_api_requests_total.
	client, err := kube.NewForConfig(restCfg, kube.WithRequestMetrics(m))
	if err != nil {
		return fmt.Errorf("%w: API client: %w", options.ErrUsage, err)
	}
	rankOpts, _ := o.Config.RankOptions()
	// Listen first, so a busy address fails before anything else starts.
	srv, err := listen(o, clk.Now())
	if err != nil {
		return err
	}
	defer srv.close()

	node, err := newNodeSide(ctx, o, m, clk, log)
	if err != nil {
		return err
	}
	defer node.close()

	var loopRef struct {
		sync.Mutex
		l *agent.Loop
	}
	api, err := newAPISide(o, client, node, m, clk, log, evictLog, func(p *v1.Pod) {
		loopRef.Lock()
		l := loopRef.l
		loopRef.Unlock()
		if l != nil {
			l.PodDeleted(p)
		}
	})
	if err != nil {
		return err
	}

	traceRec := agent.NewTrace(o, node.placed, node.start, node.ths, build.Version, clk.Now())
	if traceRec != nil {
		m.SetTrace(traceRec)
	}
	loop, err := agent.NewLoop(agent.ConfigFor(o, node.ths, rankOpts), agent.Deps{Observer: node.obsv, Waker: node.set, Pods: api.watcher,
		Evictor: api.evictor, Arming: armingOrNil(node.arming), Metrics: m, Log: log, Clock: clk, Actuator: api.act, PodEvents: api.podEvents,
		Acting: leaseActing(api.lease), Features: optionalFeatures(leasePace(o, api.lease), api.brake, api.shadow), Trace: tracerOrNil(traceRec)})
	if err != nil {
		return err
	}
	loopRef.Lock()
	loopRef.l = loop
	loopRef.Unlock()
	node.placer.Retune = loop.PlacedAnew
	node.placer.View = func() kubeletplace.View {
		if signals, layout, ok := loop.LastView(); ok {
			return kubeletplace.View{Signals: signals, DiskLayout: layout}
		}
		return node.start
	}

	// Each part stops on a context of its own, in stopOrder's order; a
	// server that fails stops the loop, and so the agent.
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	bgCtx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	infCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInformers()

	var started startTime
	checks := Health{Housekeeping: o.Housekeeping, Synced: api.watcher.Synced, Loop: loop, Clock: clk, Started: started.get}
	healthy, ready := checks.Sets()
	ready.AddWarning(CheckKubeletThresholds, node.placer.Detail)
	if api.lease != nil {
		ready.Add(CheckNodeLease, api.lease.Check)
	}
	if api.brake != nil {
		ready.AddWarning(CheckNodeBrake, api.brake.Warning)
	}
	m.SetReadiness(ready.Check)
	srv.serve(o, m, healthy, ready, func() http.Handler { return secureMux(o, loop, m, client, api.shadow, traceRec, log.Named("secure")) }, stopLoop, log)

	// Reported only now: a bad flag or host root must stay one line on
	// stderr.
	lock.Report(log, m)
	box.Report(log, m)
	logStart(log, o, build, srv, node, api, lock.Locked)
	warnHostPaths(log, o.HostRoot, o.ImageFs, o.ContainerFs)
	if off := thresholds.SwitchedOffEntries(o.Config.ThresholdSpec()); len(off) > 0 {
		log.Warn("thresholds of 0% or 100% are off, as in the kubelet: no threshold for these signals", zap.Strings("thresholds", off))
	}

	api.watcher.Start(infCtx)
	var runErr error
	var background sync.WaitGroup
	// A 403 (a ClusterRole without a grant the code needs) fails at once,
	// anything else after --informer-sync-timeout: never hang unready.
	if err := api.watcher.WaitForSync(loopCtx); err != nil {
		if loopCtx.Err() == nil {
			runErr = err
			if errors.Is(err, podwatch.ErrSyncTimeout) {
				runErr = fmt.Errorf("%w (--%s)", err, options.FlagInformerSyncTimeout)
			}
		}
	} else {
		log.Info("informers synced", zap.Int("pods", len(api.watcher.Pods())), zap.Int("namespaces", len(api.watcher.NamespaceLabels())))
		started.set(clk.Now())
		runBackground(bgCtx, &background, o, node, api, clk, log)
		runErr = loop.Run(loopCtx)
	}

	log.Info("shutting down")
	stopOrder(stopParts{
		loop: stopLoop,
		brake: func() {
			stopBackground()
			api.flushEvents(log)
			background.Wait()
		},
		lease: func() {
			if api.lease != nil {
				api.lease.Release()
			}
		},
		informers: func() {
			stopInformers()
			api.watcher.Shutdown()
		},
		serving: srv.stop,
	}).run(log)
	log.Info("stopped")
	if runErr != nil {
		return runErr
	}
	return srv.err()
}

// startTime is when the loop started, for /healthz: zero before.
type startTime struct {
	mu sync.Mutex
	t  time.Time
}

func (s *startTime) get() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

func (s *startTime) set(t time.Time) {
	s.mu.Lock()
	s.t = t
	s.mu.Unlock()
}

// runBackground starts, beside the loop, what runs until bgCtx ends: the
// withdrawal of EvictionRequests an earlier evictd left open, the node
// lease, the node brake (it lifts when bgCtx ends) and the watch of the
// kubelet process.
func runBackground(bgCtx context.Context, wg *sync.WaitGroup, o *options.Options, node *nodeSide, api *apiSide, clk clock.WithTicker, log *zap.Logger) {
	if api.requests != nil {
		// Beside the loop, never in its way: the requests an evictd
		// that crashed or was killed left open on this node's pods.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if api.lease != nil {
				// Those requests are the acting agent's to withdraw.
				select {
				case <-api.lease.Acquired():
				case <-bgCtx.Done():
					return
				}
			}
			lctx, lcancel := context.WithTimeout(bgCtx, leftoverTimeout)
			defer lcancel()
			_, _ = api.requests.WithdrawLeftovers(lctx, api.watcher.Pods()) // logged there; not fatal
		}()
	}
	if api.lease != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api.lease.Run(bgCtx)
		}()
	}
	if api.brake != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api.brake.Run(bgCtx)
		}()
	}
	if o.KubeletThresholds == options.KubeletPlace {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kubeletplace.Watch(bgCtx, node.kubeletProc, node.kubeletProcErr, o, node.placer, clk, log)
		}()
	}
}

// logStart is the "evictd starting" line: what this agent runs with.
func logStart(log *zap.Logger, o *options.Options, build buildinfo.Info, srv *servers, node *nodeSide, api *apiSide, memoryLocked bool) {
	log.Info("evictd starting", zap.String("version", build.Version), zap.String("revision", build.Revision), zap.Bool("dryRun", o.Evict.DryRun), zap.Bool("shadow", o.Shadow),
		zap.String("pdbPolicy", string(o.Evict.PDBPolicy)), zap.Duration("housekeepingInterval", o.Housekeeping),
		zap.String("wakeupSources", o.WakeupSources), zap.Bool("actEarly", o.ActEarly), zap.Bool("fitGrace", o.FitGrace), zap.Bool("expectImageGC", o.ExpectImageGC), zap.Bool("evictionRequest", o.EvictionRequest), zap.Bool("actuator", api.act != nil), zap.Bool("memoryLocked", memoryLocked),
		zap.Stringers("thresholds", node.ths), zap.String("metricsAddress", srv.plain.Addr().String()), zap.String("secureAddress", srv.secureAddr()),
		zap.String("cgroupMode", string(node.layout.Mode)), zap.String("hostRoot", o.HostRoot), zap.String("cgroupRoot", o.CgroupRoot), zap.String("nodeCgroup", o.NodeCgroup),
		zap.Bool("nodePSIReadsOff", node.noNodePSI), zap.Duration("stallWindow", o.Config.StallWindow()))
}

// newMetrics is the registry, with the dry run and the signals that have
// thresholds set: placement above the kubelet's moves values, never which
// signals have thresholds.
func newMetrics(o *options.Options, build buildinfo.Info) (*metrics.Metrics, error) {
	m, err := metrics.New(build)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	m.SetDryRun(o.Evict.DryRun)
	signals := map[thresholds.Signal]bool{}
	for _, th := range o.Thresholds() {
		signals[th.Signal] = true
	}
	for _, s := range thresholds.Signals() {
		if signals[s] {
			m.InitSignals(s)
		}
	}
	return m, nil
}
