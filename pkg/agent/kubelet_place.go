// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/kubeletcfg"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/thresholds"
)

// Values of --kubelet-thresholds.
const (
	KubeletPlace  = "place"
	KubeletIgnore = "ignore"
)

// ReasonThresholdBelowKubelet is the Event reason on the Node when a hard
// threshold the operator set sits at or below the kubelet's.
const ReasonThresholdBelowKubelet = "EvictdThresholdBelowKubelet"

// KubeletPlacement is what evictd made of the kubelet's thresholds at
// start; its Detail is the readiness check's warning.
type KubeletPlacement struct {
	// Known: the kubelet's thresholds were read.
	Known bool
	// Err says why they were not (nil when ignored on purpose).
	Err error
	// Below lists the operator's thresholds at or below the kubelet's, as
	// "memory.available<500Mi (kubelet 750Mi)".
	Below []string
	// KubeletHard is the kubelet's thresholds as its map spells them (a
	// trace's header keeps them for a replay's placement).
	KubeletHard map[string]string
}

// Detail is the /readyz warning: empty when there is nothing to say.
// Readiness stays OK either way: evictd still protects the node, only later
// than the kubelet for these signals.
func (k *KubeletPlacement) Detail() string {
	if k == nil {
		return ""
	}
	var parts []string
	if len(k.Below) > 0 {
		parts = append(parts, "at or below the kubelet's, so the kubelet evicts first: "+strings.Join(k.Below, ", "))
	}
	if k.Err != nil {
		parts = append(parts, "the kubelet's thresholds are unknown, evictd keeps its defaults: "+k.Err.Error())
	}
	return strings.Join(parts, "; ")
}

// placeAboveKubelet reads the node's kubelet thresholds and, with
// --kubelet-thresholds=place, moves evictd's default hard thresholds a margin
// above them (kubeletcfg.Place), before the thresholds are handed to the
// loop. It never fails the start: without the kubelet's thresholds evictd
// keeps its defaults and says so. start is one observation's signals, for
// the mixed units, and disk layout, for the image collection's bound; empty
// when none could be made.
func placeAboveKubelet(o *Options, start startView, log *zap.Logger, m *metrics.Metrics) *KubeletPlacement {
	st := &KubeletPlacement{}
	if o.KubeletThresholds == KubeletIgnore {
		m.SetKubeletThresholdsKnown(false)
		log.Info("the kubelet's thresholds are not read (--kubelet-thresholds=ignore): evictd's own as configured")
		return st
	}
	res, err := kubeletcfg.Read(kubeletcfg.Options{HostRoot: o.HostRoot, ConfigPath: o.KubeletConfig})
	if err != nil {
		st.Err = err
		m.SetKubeletThresholdsKnown(false)
		fix := "give --" + FlagKubeletConfig + "=PATH (the kubelet's config file on the host), or --" + FlagKubeletThresholds + "=ignore to stop looking"
		var nv *kubeletcfg.NotVisibleError
		if errors.As(err, &nv) {
			fix = "mount " + nv.Path + "'s directory read-only under --" + FlagHostRoot + " (chart: kubeletConfig.hostPath), or give --" + FlagKubeletConfig
		}
		log.Warn("the kubelet's eviction thresholds are unknown: evictd keeps its own defaults, which may sit below the kubelet's",
			logging.Err(err), zap.String("fix", fix))
		return st
	}
	return placeWith(o, *res, start, log, m)
}

// placeWith moves evictd's defaults above the kubelet's thresholds res,
// read at start or, in a replay, from the trace, within its image
// collection's bound.
func placeWith(o *Options, res kubeletcfg.Result, start startView, log *zap.Logger, m *metrics.Metrics) *KubeletPlacement {
	capacity := start.signals
	st := &KubeletPlacement{Known: true, KubeletHard: res.Raw}
	m.SetKubeletThresholdsKnown(true)
	capOf := func(s thresholds.Signal) (int64, bool) {
		ob, ok := capacity[s]
		return ob.Capacity, ok && ob.Capacity > 0
	}
	imagesOn := func(s thresholds.Signal) bool { return fslayout.ImagesOn(start.diskLayout, s.Filesystem()) }
	ps, placed := kubeletcfg.Place(maps.Clone(o.Config.EvictionHard), o.Config.OperatorHard(), res.Hard, capOf, res.ImageGC, imagesOn)
	if len(placed) > 0 {
		if err := o.Config.PlaceHard(placed); err != nil {
			log.Error("placing evictd's thresholds above the kubelet's failed: evictd keeps its defaults", logging.Err(err))
			placed = nil
		}
	}
	below := map[thresholds.Signal]bool{}
	for _, p := range ps {
		if p.AtOrBelow {
			below[p.Signal] = true
		}
		if p.Operator && p.AtOrBelow {
			st.Below = append(st.Below, fmt.Sprintf("%s<%s (kubelet %s)", p.Signal, p.Evictd, p.Kubelet))
			log.Warn("a hard threshold set for evictd sits at or below the kubelet's: the kubelet evicts first, without PodDisruptionBudgets; raise it or leave it to the default",
				zap.String("signal", string(p.Signal)), zap.String("evictd", p.Evictd), zap.String("kubelet", p.Kubelet))
		}
	}
	if !o.Config.OperatorHard()[string(thresholds.AllocatableMemoryAvailable)] {
		below[thresholds.AllocatableMemoryAvailable] = below[thresholds.MemoryAvailable]
	}
	for s, v := range res.Hard {
		amount := int64(-1)
		if c, ok := capOf(s); ok || v.Quantity != nil {
			amount = v.Amount(c)
		}
		m.SetKubeletThreshold(s, amount, below[s])
	}
	log.Info("evictd's hard thresholds placed above the kubelet's", zap.String("kubeletFrom", res.From),
		zap.String("kubelet", thresholds.JoinStatements(res.Raw)), zap.Strings("placed", kubeletcfg.Summary(ps)),
		zap.Int("moved", len(placed)), zap.Strings("ignoredSignals", sortedCopy(res.Ignored)),
		zap.Int32("imageGCHighThresholdPercent", res.ImageGC.High), zap.Int32("imageGCLowThresholdPercent", res.ImageGC.Low))
	return st
}

// emitBelowKubelet writes one Warning Event on the Node for the thresholds
// at or below the kubelet's.
func (k *KubeletPlacement) emitBelowKubelet(emit PodEventer, node string) {
	if k == nil || len(k.Below) == 0 || emit == nil {
		return
	}
	emit(v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}, v1.EventTypeWarning,
		ReasonThresholdBelowKubelet, "Configure",
		"evictd's hard thresholds "+strings.Join(k.Below, ", ")+" sit at or below the kubelet's: the kubelet evicts first, without PodDisruptionBudgets")
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// startView is what placement needs of one observation at start: the
// signals, for the mixed units, and the disk layout, for whether nodefs
// holds the images. Zero when the observation failed: placement then
// leaves the mixed units alone and bounds imagefs only.
type startView struct {
	signals    map[thresholds.Signal]thresholds.Observation
	diskLayout fslayout.Layout
}

// startObservation takes one observation for placement.
func startObservation(ctx context.Context, obsv *pressure.Observer, log *zap.Logger) startView {
	obs, err := obsv.Observe(ctx)
	if err != nil {
		log.Info("no observation at start for the kubelet's thresholds: a percentage against a quantity is not compared", logging.Err(err))
		return startView{}
	}
	return startView{signals: thresholds.Observe(obs.Summary), diskLayout: obs.Node.DiskLayout}
}

// configThresholds is the configuration's thresholds, the memory.high
// family's included; validated before, so no error.
func configThresholds(o *Options) []thresholds.Threshold {
	ths, _ := o.Config.Thresholds()
	if mh := o.Config.MemoryHighThresholds(); mh.Enabled() {
		ths = append(ths, family.MemHighThreshold(mh))
	}
	return ths
}
