// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/pkg/agent/fastpath"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/kubeletwatch"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
	"github.com/evictd/evictd/pkg/thresholds"
)

// nodeSide is what the agent reads of the node: the observer, the
// thresholds placed above the kubelet's, and the wake-up sources.
type nodeSide struct {
	obsv *pressure.Observer
	// start is the observation placement was made with at start.
	start  kubeletplace.View
	placer *kubeletplace.Placer
	placed *kubeletplace.Placement
	// kubeletProc is the kubelet process found before the start's read.
	kubeletProc    kubeletwatch.Process
	kubeletProcErr error
	// ths are the thresholds, placed.
	ths    []thresholds.Threshold
	layout pressure.Layout
	set    *wakeup.Set
	arming *fastpath.Manager
	// noNodePSI: the observer leaves the node's pressure files alone.
	noNodePSI bool
}

func newNodeSide(ctx context.Context, o *options.Options, m *metrics.Metrics, clk clock.WithTicker, log *zap.Logger) (*nodeSide, error) {
	n := &nodeSide{}
	// An unprivileged PSI trigger on the host's or kubepods' memory pressure
	// stops firing if the same groups' pressure files are read in the loop
	// (docs/kernel.md, "PSI triggers and reads of the same group"), so the observer leaves them alone then.
	// A stall threshold needs those files read: then reading wins, and the
	// loop polls (adaptive) where the unprivileged trigger would not fire.
	n.noNodePSI = o.Sources.PSI && !wakeup.HasCapSysResource() && !hasStallThreshold(o.Thresholds())
	obsv, err := pressure.NewObserver(pressure.Options{
		HostRoot: o.HostRoot, CgroupRoot: o.CgroupRoot, NodeCgroup: o.NodeCgroup, ImageFsPath: o.ImageFs, ContainerFsPath: o.ContainerFs, NoNodePSI: n.noNodePSI, Clock: clk,
		NoHugepageAwareEviction: !o.Config.HugepageAware(),
	}, log.Named("observe"))
	if err != nil {
		if errors.Is(err, pressure.ErrHostRoot) || errors.Is(err, pressure.ErrInvalidOptions) {
			return nil, fmt.Errorf("%w: %w", options.ErrUsage, err)
		}
		return nil, err
	}
	n.obsv = obsv
	// Before anything else reads the thresholds: placement may raise
	// evictd's defaults above the kubelet's (pkg/kubeletplace).
	n.start = kubeletplace.Observe(ctx, obsv, log)
	// The kubelet process first: one that restarts during the read below
	// is then seen as new, and read again.
	// A process named kubelet in a pod's cgroup is passed over, and
	// warned of once.
	impostors := kubeletplace.NewImpostorLog(log)
	n.kubeletProc, n.kubeletProcErr = kubeletwatch.Find(filepath.Join(o.HostRoot, "proc"), impostors.Refused)
	n.placer = kubeletplace.NewPlacerLogging(o, n.start, log, m, impostors, clk)
	n.placed = n.placer.Current()
	n.ths = o.Thresholds()
	n.layout = obsv.Layout()
	// Only the wake-up sources this node can have are armed and exported.
	sources := o.Sources.On(n.layout)
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
	if n.layout.UnifiedMount != "" {
		sysDirs = append(sysDirs, n.layout.UnifiedMount)
	}
	n.set, err = wakeup.New(log.Named("wakeup"), clk, wakeup.Options{SystemPressureDirs: sysDirs})
	if err != nil {
		obsv.Close()
		return nil, err
	}
	if sources != (wakeup.Sources{}) {
		n.arming = fastpath.New(n.set, fastpath.Config{Sources: sources, Thresholds: n.ths}, log.Named("wakeup"), clk, m)
	} else {
		for _, s := range sources.List() {
			m.SetWakeupSourceActive(string(s), true) // poll and kick
		}
	}
	return n, nil
}

func (n *nodeSide) close() {
	n.set.Close()
	n.obsv.Close()
}
