// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/actuator"
	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/family"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/metrics"
)

// Actuator is the node-local actuator (*actuator.Actuator), on with
// --actuator: the only writes evictd makes to the node.
type Actuator interface {
	Check() error
	Contain(podCgroup string) (actuator.Contained, error)
	Relax(containerCgroup string) (actuator.Relaxed, error)
}

// PodEventer leaves an Event on a pod (evict.EventWriter.Emit; nil in dry
// run).
type PodEventer func(ref v1.ObjectReference, eventType, reason, action, note string)

// actuation is the loop's side of the actuator: its writes, what they are
// reported as, and its failure for readiness. Its methods are called from
// eviction goroutines as well as the loop's.
type actuation struct {
	act    Actuator
	events PodEventer
	m      *metrics.Metrics
	log    *zap.Logger

	mu sync.Mutex
	// err is why the actuator cannot write (its check at start, or its
	// last write), nil while it can.
	err error
}

func newActuation(act Actuator, events PodEventer, m *metrics.Metrics, log *zap.Logger) *actuation {
	if act == nil {
		return nil
	}
	a := &actuation{act: act, events: events, m: m, log: log}
	err := act.Check()
	switch {
	case errors.Is(err, actuator.ErrNoKubepods):
		m.SetActuatorWritable(true) // nothing to write yet; the first write tells
	case err != nil:
		a.failed(err)
	default:
		m.SetActuatorWritable(true)
		log.Info("actuator on: hard memory victims are contained once their eviction is accepted")
	}
	return a
}

// failed records a write the actuator could not make: an operator who
// turned it on must hear that it does nothing.
func (a *actuation) failed(err error) {
	a.mu.Lock()
	a.err = err
	a.mu.Unlock()
	a.m.SetActuatorWritable(false)
	a.log.Error("the actuator cannot write the pod cgroups; evictd goes on evicting without it", logging.Err(err))
}

func (a *actuation) wrote(action string, err error) {
	a.m.ActuatorWrote(action, err)
	if actuator.VictimSpecific(err) {
		// The victim's cgroup, not the actuator: readiness stays as it is.
		a.log.Warn("the actuator could not write this pod's cgroup", zap.String("action", action), logging.Err(err))
		return
	}
	if err != nil {
		a.failed(err)
		return
	}
	a.mu.Lock()
	a.err = nil
	a.mu.Unlock()
	a.m.SetActuatorWritable(true)
}

// problem is the actuator's failure, for readiness (nil when off).
func (a *actuation) problem() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		return nil
	}
	return fmt.Errorf("actuator: %w", a.err)
}

// containable reports whether an accepted eviction's victim is to be
// contained: a hard memory or stall victim, whose grace period a fast
// grower could outrun.
func containable(req evict.Request, out evict.Outcome) bool {
	if !req.Hard || out.Result != evict.Evicted && out.Result != evict.ForcedDelete {
		return false
	}
	r := episode.Of(req.Signal)
	return r == episode.Memory || r == episode.Stall
}

// contain stops the growth of pod, whose cgroup is cgroup, now that its
// eviction is accepted.
func (a *actuation) contain(pod *v1.Pod, cgroup string) {
	if cgroup == "" {
		a.log.Warn("victim not contained: its cgroup was not in the last observation", zap.String("pod", pod.Namespace+"/"+pod.Name))
		return
	}
	c, err := a.act.Contain(cgroup)
	a.wrote(metrics.ActuatorContain, err)
	if err != nil {
		return
	}
	a.log.Info("victim contained while it shuts down", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("file", c.File),
		zap.Uint64("limitBytes", c.Limit), zap.Uint64("usageBytes", c.Usage))
	if a.events != nil {
		a.events(podRef(pod.Namespace, pod.Name, pod.UID), v1.EventTypeNormal, evict.ReasonVictimContained, evict.ActionActuate,
			fmt.Sprintf("evictd set the pod's memory limit to %s (its usage %s) while it shuts down, so that its growth is throttled (cgroup v2) or stopped (v1) during its grace period",
				mib(c.Limit), mib(c.Usage)))
	}
}

// whose names the cgroup relaxed in an Event: a container's, or the pod's
// own (pod-level resources).
func whose(container string) string {
	if container == family.PodCgroupName {
		return "the pod cgroup's"
	}
	return "container " + container + "'s"
}

func podRef(namespace, name string, uid types.UID) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name, UID: uid}
}

func mib(b uint64) string { return fmt.Sprintf("%.0fMi", float64(b)/(1<<20)) }

// relaxer is the memory.high family's stage 1 through the actuator; nil
// when the actuator is off.
func (a *actuation) relaxer() family.Relaxer {
	if a == nil {
		return nil
	}
	return func(r family.Relax) error {
		rel, err := a.act.Relax(r.Cgroup)
		a.wrote(metrics.ActuatorRelax, err)
		if err != nil {
			a.log.Warn("memory.high not relaxed; the pod is evicted as without the actuator", zap.String("podUID", r.PodUID),
				zap.String("container", r.Container), logging.Err(err))
			return err
		}
		a.log.Info("memory.high relaxed to memory.max", zap.String("podUID", r.PodUID), zap.String("container", r.Container),
			zap.String("file", rel.File), zap.String("from", rel.From), zap.String("to", rel.To), zap.String("why", r.Why))
		if a.events != nil && r.Pod != nil {
			a.events(podRef(r.Pod.Namespace, r.Pod.Name, r.Pod.UID), v1.EventTypeNormal, evict.ReasonMemoryHighRelaxed, evict.ActionActuate,
				fmt.Sprintf("evictd raised %s memory.high from %s to its memory.max, %s: %s. The pod is evicted only if it stays stuck for the grace period.",
					whose(r.Container), rel.From, rel.To, r.Why))
		}
		return nil
	}
}
