// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/actuator"
	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/agent/fastpath"
	"github.com/evictd/evictd/pkg/agent/podwatch"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/hostpaths"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/kubeletwatch"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/memlock"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
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
// ends; then it stops cleanly: the eviction call under way finishes, queued
// Events are flushed, the HTTP server shuts down gracefully. build labels
// evictd_build_info. Errors that are the operator's to fix wrap options.ErrUsage.
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
	clk := clock.RealClock{}
	// pkg/evict names the node in its own lines; everything else gets it here.
	evictLog := log.Named("evict")
	log = log.With(zap.String("node", o.NodeName))

	restCfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("%w: %w", options.ErrUsage, err)
	}
	restCfg.UserAgent = "evictd/" + build.Version
	client, err := kube.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("%w: API client: %w", options.ErrUsage, err)
	}
	// The signals to export; placement above the kubelet's (below) moves
	// values, never which signals have thresholds.
	ths := o.Thresholds()
	rankOpts, _ := o.Config.RankOptions()

	m, err := metrics.New(build)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	m.SetDryRun(o.Evict.DryRun)
	signals := map[thresholds.Signal]bool{}
	for _, th := range ths {
		signals[th.Signal] = true
	}
	for _, s := range thresholds.Signals() {
		if signals[s] {
			m.InitSignals(s)
		}
	}

	// Listen first, so a busy address fails before anything else starts.
	ln, err := net.Listen("tcp", o.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen on --%s %q: %w", options.FlagMetricsAddress, o.MetricsAddr, err)
	}
	defer ln.Close()
	secureLn, err := listenSecure(o, clk.Now())
	if err != nil {
		return fmt.Errorf("%w: %w", options.ErrUsage, err)
	}
	if secureLn != nil {
		defer secureLn.Close()
	}

	// An unprivileged PSI trigger on the host's or kubepods' memory pressure
	// stops firing if the same groups' pressure files are read in the loop
	// (docs/kernel.md, "PSI triggers and reads of the same group"), so the observer leaves them alone then.
	// A stall threshold needs those files read: then reading wins, and the
	// loop polls (adaptive) where the unprivileged trigger would not fire.
	noNodePSI := o.Sources.PSI && !wakeup.HasCapSysResource() && !hasStallThreshold(ths)
	obsv, err := pressure.NewObserver(pressure.Options{
		HostRoot: o.HostRoot, CgroupRoot: o.CgroupRoot, NodeCgroup: o.NodeCgroup, ImageFsPath: o.ImageFs, ContainerFsPath: o.ContainerFs, NoNodePSI: noNodePSI, Clock: clk,
		NoHugepageAwareEviction: !o.Config.HugepageAware(),
	}, log.Named("observe"))
	if err != nil {
		if errors.Is(err, pressure.ErrHostRoot) || errors.Is(err, pressure.ErrInvalidOptions) {
			return fmt.Errorf("%w: %w", options.ErrUsage, err)
		}
		return err
	}
	defer obsv.Close()
	// Before anything else reads the thresholds: placement may raise
	// evictd's defaults above the kubelet's (kubelet_place.go).
	start := kubeletplace.Observe(ctx, obsv, log)
	// The kubelet process first: one that restarts during the read below
	// is then seen as new, and read again.
	kubeletProc, kubeletProcErr := kubeletwatch.Find(filepath.Join(o.HostRoot, "proc"))
	placer := kubeletplace.NewPlacer(o, start, log, m)
	kubeletPlaced := placer.Current()
	ths = o.Thresholds()
	layout := obsv.Layout()
	// Only the wake-up sources this node can have are armed and exported.
	sources := o.Sources.On(layout)
	var srcNames []string
	for _, s := range sources.List() {
		srcNames = append(srcNames, string(s))
	}
	m.InitWakeupSources(srcNames...)

	// The host's /proc/pressure and this process's own are the same
	// system-wide group (the PSI fallback arms the latter in a container).
	sysDirs := []string{filepath.Join(o.HostRoot, "proc", "pressure")}
	if own := filepath.Dir(fastpath.OwnProcPressureMemory); own != sysDirs[0] {
		sysDirs = append(sysDirs, own)
	}
	if layout.UnifiedMount != "" {
		sysDirs = append(sysDirs, layout.UnifiedMount)
	}
	set, err := wakeup.New(log.Named("wakeup"), clk, wakeup.Options{SystemPressureDirs: sysDirs})
	if err != nil {
		return err
	}
	defer set.Close()
	var arming *fastpath.Manager
	if sources != (fastpath.Sources{}) {
		arming = fastpath.New(set, fastpath.Config{Sources: sources, Thresholds: ths}, log.Named("wakeup"), clk, m)
	} else {
		for _, s := range sources.List() {
			m.SetWakeupSourceActive(string(s), true) // poll and kick
		}
	}

	var events *evict.EventWriter
	if !o.Evict.DryRun {
		events = evict.NewEventWriter(client, "evictd-"+o.NodeName, log.Named("events"), clk)
	}
	var loopRef struct {
		sync.Mutex
		l *agent.Loop
	}
	shadowRec := newShadow(o, log.Named("shadow"))
	var kubeletEvicted func(*v1.Event)
	if shadowRec != nil {
		kubeletEvicted = shadowRec.KubeletEvicted
	}
	watcher, err := podwatch.New(podwatch.Options{
		Client: client, NodeName: o.NodeName, Namespaces: o.Config.HasSelectors(), Log: log.Named("podwatch"),
		SyncTimeout: o.InformerSyncTimeout, KubeletEvicted: kubeletEvicted,
		OnDelete: func(p *v1.Pod) {
			loopRef.Lock()
			l := loopRef.l
			loopRef.Unlock()
			if l != nil {
				l.PodDeleted(p)
			}
		},
	})
	if err != nil {
		return err
	}
	// An eviction answered tells the informers, backing off after an API
	// outage, that the server is back: the victim's deletion must be seen
	// now, not up to a minute later.
	evictAPI := answerNoter{PodAPI: client, note: watcher.Answered}
	ev, err := evict.New(evict.Config{Options: o.Evict, Client: evictAPI, NodeName: o.NodeName, Events: events, Metrics: m, Logger: evictLog, Clock: clk})
	if err != nil {
		return fmt.Errorf("%w: %w", options.ErrUsage, err)
	}

	var evictor agent.Evictor = ev
	var requests *evictreq.Evictor
	if o.EvictionRequest {
		requests, err = evictreq.New(evictreq.Config{Imperative: ev, API: client, ResponderWait: o.EvictionRequestWait,
			Served: m.SetEvictionRequestServed, Logger: evictLog.Named("request"), Clock: clk})
		if err != nil {
			return fmt.Errorf("%w: %w", options.ErrUsage, err)
		}
		evictor = requests
		m.SetEvictionRequestServed(true)
	}

	var act agent.Actuator
	switch {
	case o.Actuator && o.Evict.DryRun:
		log.Info("the actuator writes nothing in dry run: --actuator is off")
	case o.Actuator:
		act = actuator.New(layout)
	}
	var podEvents agent.PodEventer
	if events != nil {
		podEvents = events.Emit
	}
	kubeletPlaced.EmitBelow(kubeletplace.Emitter(podEvents), o.NodeName)
	placer.Emit = kubeletplace.Emitter(podEvents)

	lease, err := newNodeLease(o, client, watcher, m, set.Kick, log, clk)
	if err != nil {
		return fmt.Errorf("%w: %w", options.ErrUsage, err)
	}

	brake, err := newNodeBrake(o, client, watcher, lease, m, log, clk)
	if err != nil {
		return fmt.Errorf("%w: %w", options.ErrUsage, err)
	}

	cfg := agent.ConfigFor(o, ths, rankOpts)
	traceRec := agent.NewTrace(o, kubeletPlaced.KubeletHard, start.Signals, build.Version, clk.Now())
	if traceRec != nil {
		m.SetTrace(traceRec)
	}
	loop, err := agent.NewLoop(cfg, agent.Deps{Observer: obsv, Waker: set, Pods: watcher, Evictor: evictor, Arming: armingOrNil(arming),
		Metrics: m, Log: log, Clock: clk, Actuator: act, PodEvents: podEvents, Acting: leaseActing(lease), Features: optionalFeatures(brake, shadowRec),
		Trace: tracerOrNil(traceRec)})
	if err != nil {
		return err
	}
	loopRef.Lock()
	loopRef.l = loop
	loopRef.Unlock()
	placer.Retune = loop.PlacedAnew
	placer.View = func() kubeletplace.View {
		if signals, layout, ok := loop.LastView(); ok {
			return kubeletplace.View{Signals: signals, DiskLayout: layout}
		}
		return start
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	started := time.Time{}
	var startedMu sync.Mutex
	checks := Health{Housekeeping: o.Housekeeping, Synced: watcher.Synced, Loop: loop, Clock: clk, Started: func() time.Time {
		startedMu.Lock()
		defer startedMu.Unlock()
		return started
	}}
	// More named checks: healthy.Add / ready.Add(name, func() error), or
	// ready.AddWarning(name, func() string) for a passing one with a detail.
	healthy, ready := checks.Sets()
	ready.AddWarning(CheckKubeletThresholds, placer.Detail)
	if lease != nil {
		ready.Add(CheckNodeLease, lease.Check)
	}
	if brake != nil {
		ready.AddWarning(CheckNodeBrake, brake.Warning)
	}
	m.SetReadiness(ready.Check)
	var serveErr error
	plainMetrics := m
	if o.SecureMetricsOnly {
		plainMetrics = nil
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := metrics.Serve(ctx, ln, metrics.NewMux(plainMetrics, metrics.Checks{Healthz: healthy, Readyz: ready})); err != nil {
			serveErr = err
			log.Error("metrics server failed", logging.Err(err))
			cancel()
		}
	}()
	secureAddr := ""
	if secureLn != nil {
		secureAddr = secureLn.Addr().String()
		h := secureMux(o, loop, m, client, shadowRec, traceRec, log.Named("secure"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := metrics.Serve(ctx, secureLn, h); err != nil {
				serveErr = err
				log.Error("secure server failed", logging.Err(err))
				cancel()
			}
		}()
	}

	// Reported only now: a bad flag or host root must stay one line on
	// stderr.
	lock.Report(log, m)
	log.Info("evictd starting", zap.String("version", build.Version), zap.String("revision", build.Revision), zap.Bool("dryRun", o.Evict.DryRun), zap.Bool("shadow", o.Shadow),
		zap.String("pdbPolicy", string(o.Evict.PDBPolicy)), zap.Duration("housekeepingInterval", o.Housekeeping),
		zap.String("wakeupSources", o.WakeupSources), zap.Bool("actEarly", o.ActEarly), zap.Bool("fitGrace", o.FitGrace), zap.Bool("expectImageGC", o.ExpectImageGC), zap.Bool("evictionRequest", o.EvictionRequest), zap.Bool("actuator", act != nil), zap.Bool("memoryLocked", lock.Locked),
		zap.Stringers("thresholds", ths), zap.String("metricsAddress", ln.Addr().String()), zap.String("secureAddress", secureAddr),
		zap.String("cgroupMode", string(layout.Mode)), zap.String("hostRoot", o.HostRoot), zap.String("cgroupRoot", o.CgroupRoot), zap.String("nodeCgroup", o.NodeCgroup),
		zap.Bool("nodePSIReadsOff", noNodePSI), zap.Duration("stallWindow", o.Config.StallWindow()))

	warnHostPaths(log, o.HostRoot, o.ImageFs, o.ContainerFs)

	if off := thresholds.SwitchedOffEntries(o.Config.ThresholdSpec()); len(off) > 0 {
		log.Warn("thresholds of 0% or 100% are off, as in the kubelet: no threshold for these signals", zap.Strings("thresholds", off))
	}

	watcher.Start(ctx)
	var runErr error
	// A 403 (a ClusterRole without a grant the code needs) fails at once,
	// anything else after --informer-sync-timeout: never hang unready.
	if err := watcher.WaitForSync(ctx); err != nil {
		if ctx.Err() == nil {
			runErr = err
			if errors.Is(err, podwatch.ErrSyncTimeout) {
				runErr = fmt.Errorf("%w (--%s)", err, options.FlagInformerSyncTimeout)
			}
		}
	} else {
		log.Info("informers synced", zap.Int("pods", len(watcher.Pods())), zap.Int("namespaces", len(watcher.NamespaceLabels())))
		startedMu.Lock()
		started = clk.Now()
		startedMu.Unlock()
		if requests != nil {
			// Beside the loop, never in its way: the requests an evictd
			// that crashed or was killed left open on this node's pods.
			wg.Add(1)
			go func() {
				defer wg.Done()
				if lease != nil {
					// Those requests are the acting agent's to withdraw.
					select {
					case <-lease.Acquired():
					case <-ctx.Done():
						return
					}
				}
				lctx, lcancel := context.WithTimeout(ctx, leftoverTimeout)
				defer lcancel()
				_, _ = requests.WithdrawLeftovers(lctx, watcher.Pods()) // logged there; not fatal
			}()
		}
		if lease != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lease.Run(ctx)
			}()
		}
		if brake != nil {
			// It lifts the brake when ctx ends, before the lease is
			// released below: the next agent finds the node clean.
			wg.Add(1)
			go func() {
				defer wg.Done()
				brake.Run(ctx)
			}()
		}
		if o.KubeletThresholds == options.KubeletPlace {
			wg.Add(1)
			go func() {
				defer wg.Done()
				kubeletplace.Watch(ctx, kubeletProc, kubeletProcErr, o, placer, clk, log)
			}()
		}
		runErr = loop.Run(ctx)
	}

	log.Info("shutting down")
	cancel()
	if events != nil {
		fctx, fcancel := context.WithTimeout(context.Background(), eventFlushTimeout)
		if err := events.Shutdown(fctx); err != nil {
			log.Warn("events not all written", logging.Err(err))
		}
		fcancel()
	}
	watcher.Shutdown()
	wg.Wait()
	if lease != nil {
		// Only now: the loop has stopped and its calls have answered. The
		// next agent then takes over at once, not a lease later.
		lease.Release()
	}
	log.Info("stopped")
	if runErr != nil {
		return runErr
	}
	return serveErr
}

// armingOrNil keeps a nil *fastpath.Manager from becoming a non-nil
// interface.
func armingOrNil(m *fastpath.Manager) agent.Arming {
	if m == nil {
		return nil
	}
	return m
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: %w", options.FlagKubeconfig, kubeconfig, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --%s given and not running in a cluster: %w", options.FlagKubeconfig, err)
	}
	return c, nil
}

// Health holds the /healthz and /readyz checks.
type Health struct {
	Housekeeping time.Duration
	// Synced reports whether the informers have synced.
	Synced func() bool
	Loop   interface {
		LastObservation() time.Time
		LastPass() time.Time
		Problem() error
	}
	Clock clock.PassiveClock
	// Started is when the loop started (zero before).
	Started func() time.Time
}

// ReadyWindow is how recent the last successful observation must be.
func (h Health) ReadyWindow() time.Duration { return 5*h.Housekeeping + 5*time.Second }

// StuckWindow is how long the loop may go without finishing a pass before
// /healthz fails (a restart is then the way out).
func (h Health) StuckWindow() time.Duration { return max(10*h.Housekeeping, 2*time.Minute) }

// Informers fails until the pod and namespace informers have synced.
func (h Health) Informers() error {
	if !h.Synced() {
		return errors.New("informers have not synced yet")
	}
	return nil
}

// Observing fails while the loop cannot protect the node as it should
// (agent.Loop.Problem) or has not observed it within ReadyWindow.
func (h Health) Observing() error {
	if err := h.Loop.Problem(); err != nil {
		return err
	}
	last := h.Loop.LastObservation()
	if last.IsZero() {
		return errors.New("no observation has succeeded yet")
	}
	if age := h.Clock.Since(last); age > h.ReadyWindow() {
		return fmt.Errorf("last successful observation was %v ago (more than %v)", age.Round(time.Millisecond), h.ReadyWindow())
	}
	return nil
}

// Healthz fails only when the loop is stuck: started, and no pass has
// finished within StuckWindow. Waiting for the API server is not a reason
// to restart.
func (h Health) Healthz() error {
	start := h.Started()
	if start.IsZero() {
		return nil
	}
	last := h.Loop.LastPass()
	if last.Before(start) {
		last = start
	}
	if age := h.Clock.Since(last); age > h.StuckWindow() {
		return fmt.Errorf("the agent loop has not finished a pass for %v", age.Round(time.Second))
	}
	return nil
}

func hasStallThreshold(ths []thresholds.Threshold) bool {
	for _, th := range ths {
		if th.Signal.Stall() {
			return true
		}
	}
	return false
}

// answerNoter passes every eviction and deletion's result to note.
type answerNoter struct {
	evict.PodAPI
	note func(error)
}

func (a answerNoter) Evict(ctx context.Context, ev *policyv1.Eviction) error {
	err := a.PodAPI.Evict(ctx, ev)
	a.note(err)
	return err
}

func (a answerNoter) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	err := a.PodAPI.DeletePod(ctx, namespace, name, opts)
	a.note(err)
	return err
}

// warnHostPaths logs, once at start, each host directory evictd can run
// without but found missing or empty: a DaemonSet mounts them unchecked, so
// a wrong path is otherwise an empty directory read without error
// (package hostpaths).
func warnHostPaths(log *zap.Logger, hostRoot, imageFs, containerFs string) {
	for _, p := range hostpaths.Check(hostRoot, imageFs, containerFs) {
		state := "empty"
		if p.Missing {
			state = "missing"
		}
		log.Warn("host directory missing or empty: check the host paths evictd is given", zap.String("path", p.Path),
			zap.String("state", state), zap.String("unmeasured", p.Loses), zap.String("fix", p.Hint))
	}
}
