// SPDX-License-Identifier: Apache-2.0

// Package nodelease makes one evictd act per node: the agent that holds
// the node's coordination.k8s.io/v1 Lease acts, any other one on the same
// node only observes and is not ready, and takes over when the holder is
// gone.
//
// The Elector is the pure part: from the Lease as read, the clock and what
// the informer knows of the pods involved, it plans the one write to make.
// Runner is the thin part that reads, writes and watches the Lease.
// client-go's tools/leaderelection is not used: it imports the clientset,
// which evictd keeps out for its memory (pkg/kube), and it knows nothing
// of a handover between two pods of one DaemonSet.
package nodelease

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/install"
)

// Defaults. The lease has two paces. Near pressure (a signal in its band, an
// episode open) it lasts DefaultDuration and is renewed every 10 s, the
// kubelet's own heartbeat, so that a crashed holder is taken over within
// 30 s when it matters. At idle it lasts DefaultIdleDuration and is renewed
// every 2 minutes or a little sooner (jitter): under 0.01 writes a second
// per node, a tenth of the kubelet's heartbeat, on a node with nothing to
// do. A holder that cannot renew stops acting one interval before anyone may
// take over (Elector.Acting).
const (
	DefaultDuration     = 30 * time.Second
	DefaultIdleDuration = 6 * time.Minute
	// MaxIdleDuration bounds how long a frozen holder, one whose pod and
	// process still exist, can keep an idle node's lease from another agent.
	MaxIdleDuration = time.Hour
	// MinDuration keeps the renewal interval (a third of it) at 1 s or more.
	MinDuration = 3 * time.Second
	// AnnotationHandover on the Lease names the identity of a newer pod of
	// the holder's own DaemonSet that asks for it (a maxSurge rollout).
	AnnotationHandover = "evictd.io/handover-to"
	// NamePrefix: evictd's Lease is named after its node, with a prefix
	// that tells it apart from the kubelet's heartbeat Lease of the same
	// node where both share a namespace (--node-lease-namespace
	// kube-node-lease). Only a namespace of evictd's own keeps it apart
	// from every kubelet's: node names are DNS subdomains, so a node x's
	// evictd-x is node evictd-x's heartbeat there.
	NamePrefix = "evictd-"
)

// Name is the Lease's name for node.
func Name(node string) string { return NamePrefix + node }

// RenewInterval is how often a holder renews a lease of duration d, at the
// latest: each renewal comes up to a tenth of it sooner (renewJitter), so
// that agents whose renewals once fell together (an API server's restart)
// drift apart.
func RenewInterval(d time.Duration) time.Duration { return d / 3 }

// renewJitter is the largest share of a renewal interval a renewal comes
// early by.
const renewJitter = 0.1

// Peer is what the pod informer knows of an agent's pod: its controller
// (a DaemonSet) and when it was created. Known is false outside a pod or
// when the pod is not (yet) in the informer.
type Peer struct {
	Known      bool
	Controller types.UID
	Created    time.Time
	// Gone: what only the node and the API server can say shows the agent
	// no longer runs (its pod is not on the node any more, or has ended;
	// its process, outside a pod, is not there). A gone holder's lease is
	// taken over as if it lasted the short, active duration from its last
	// renewal: no slower than a crashed holder was before the lease had an
	// idle pace.
	Gone bool
}

// replaces reports whether p is a newer pod of old's own controller: the
// only case in which a holder hands its lease over.
func (p Peer) replaces(old Peer) bool {
	return p.Known && old.Known && p.Controller != "" && p.Controller == old.Controller && p.Created.After(old.Created)
}

// Input is one planning round's view.
type Input struct {
	Now time.Time
	// Current is the Lease as last read; nil when there is none.
	Current *coordinationv1.Lease
	// Peer looks an agent's pod up by its identity ("namespace/name").
	Peer func(identity string) Peer
	// NodeUID is the Node's UID, for the Lease's ownerReference ("" when
	// the node is not known yet: the reference is added at a later write).
	NodeUID types.UID
}

// Write is the kind of write a Plan asks for.
type Write int

// The writes.
const (
	None Write = iota
	Create
	Update
)

// Plan is the write to make and what it means.
type Plan struct {
	Write Write
	// Lease is the object to create or update (nil with None).
	Lease *coordinationv1.Lease
	// Wait is when to plan again at the latest (a watch event may come
	// first).
	Wait time.Duration
	// HandOver is the identity the write hands the lease over to.
	HandOver string
}

// Elector decides for one agent. It is not safe for concurrent use: the
// Runner calls it from one goroutine and publishes its state.
type Elector struct {
	namespace, node, self string
	// install is the agent's install (package install), written on the
	// lease as install.Annotation; "" writes none.
	install string
	// duration is the active pace's, idle the idle pace's.
	duration, idle time.Duration
	// jitter returns a number in [0, 1) (math/rand/v2's Float64).
	jitter func() float64

	// near: pressure is near (Runner.SetNear), so the lease is held at the
	// active pace.
	near bool

	// held: this agent holds the lease as last written; renewed is the
	// renewTime it wrote last, wrote the duration it wrote then, and due
	// when it renews next.
	held    bool
	renewed time.Time
	wrote   time.Duration
	due     time.Time
	// handedTo is the identity this agent handed the lease to.
	handedTo string
	// holder and until describe the other agent that holds the lease.
	holder string
	until  time.Time
	// asked: this agent asked the holder to hand over.
	asked bool
	// foreign: the Lease under this agent's name was written by no agent
	// (its holder, foreignHolder, is not an agent's identity), so it is
	// left alone.
	foreign       bool
	foreignHolder string
}

// NewElector returns an Elector for identity self on node. duration must be
// at least MinDuration.
func NewElector(namespace, node, self string, duration time.Duration) (*Elector, error) {
	switch {
	case namespace == "" || node == "" || self == "":
		return nil, fmt.Errorf("nodelease: namespace %q, node %q and identity %q must all be set", namespace, node, self)
	case !IsAgentIdentity(self):
		return nil, fmt.Errorf("nodelease: identity %q is not an agent's (namespace/pod, or host_pid outside a pod)", self)
	case duration < MinDuration:
		return nil, fmt.Errorf("nodelease: lease duration %v is below %v", duration, MinDuration)
	}
	return &Elector{namespace: namespace, node: node, self: self, duration: duration, idle: duration, jitter: func() float64 { return 0 }}, nil
}

// SetInstall sets the install the agent belongs to (its ID, package
// install): every lease this agent creates, takes over or renews names it,
// so that the uninstall of another install, sharing the namespace, leaves
// the lease alone.
func (e *Elector) SetInstall(id string) { e.install = id }

// SetIdle sets the idle pace's duration (at least the active one's) and
// the jitter's source.
func (e *Elector) SetIdle(idle time.Duration, jitter func() float64) error {
	if idle < e.duration || idle > MaxIdleDuration {
		return fmt.Errorf("nodelease: idle lease duration %v must be within the lease duration %v and %v", idle, e.duration, MaxIdleDuration)
	}
	e.idle = idle
	if jitter != nil {
		e.jitter = jitter
	}
	return nil
}

// SetNear sets whether pressure is near: the next plan renews at the
// active pace at once, or, once pressure is gone, returns to the idle pace
// at the next renewal.
func (e *Elector) SetNear(near bool) { e.near = near }

// Acting reports whether the agent may act at now: it holds the lease and
// its last renewal is recent enough that no other agent can have taken it
// over, with one renewal interval to spare (a write under way, a clock
// read late).
func (e *Elector) Acting(now time.Time) bool {
	return e.held && now.Before(e.renewed.Add(e.wrote-RenewInterval(e.wrote)))
}

// Active reports whether the agent acts under a lease of the active pace:
// what an eviction call waits for, so that whoever takes over a crashed
// holder's lease after the active duration never meets a call of its.
func (e *Elector) Active(now time.Time) bool {
	return e.Acting(now) && e.wrote <= e.duration
}

// pace is the duration the next renewal writes.
func (e *Elector) pace() time.Duration {
	if e.near {
		return e.duration
	}
	return e.idle
}

// Plan decides the next write from in. It changes the Elector's state only
// where the decision itself must take effect before the write: a holder
// that hands over stops acting first.
func (e *Elector) Plan(in Input) Plan {
	renew := RenewInterval(e.duration)
	cur := in.Current
	if cur == nil {
		e.asked, e.foreign = false, false
		return Plan{Write: Create, Lease: e.fill(&coordinationv1.Lease{}, in, true), Wait: renew}
	}
	holder := ""
	if cur.Spec.HolderIdentity != nil {
		holder = *cur.Spec.HolderIdentity
	}
	want := cur.Annotations[AnnotationHandover]
	if holder == e.self {
		e.foreign = false
		l := cur.DeepCopy()
		if want != "" && want != e.self {
			them, us := in.Peer(want), in.Peer(e.self)
			switch {
			case them.replaces(us):
				// Stop acting before the write that hands over, never after.
				e.held = false
				delete(l.Annotations, AnnotationHandover)
				l.Spec.HolderIdentity = &want
				l.Spec.AcquireTime = micro(in.Now)
				l.Spec.RenewTime = micro(in.Now)
				l.Spec.LeaseTransitions = ptr(transitions(cur) + 1)
				e.setOwner(l, in.NodeUID)
				return Plan{Write: Update, Lease: l, Wait: renew, HandOver: want}
			case them.Known && us.Known:
				// Not a newer pod of this agent's DaemonSet (another
				// install): the request is dropped, the lease kept. A
				// requester the informer does not list yet keeps its
				// request until it does.
				delete(l.Annotations, AnnotationHandover)
			}
		}
		// Ours: renewed when due, or at once when pressure comes near on
		// an idle lease, a request was dropped, or this agent has not
		// written it yet (a restarted container of the same pod, or the
		// pod a holder handed over to, takes it at once). Otherwise
		// nothing: the watch's echo of this agent's own renewal is no
		// reason to write again.
		dropped := len(l.Annotations) != len(cur.Annotations)
		// A lease that does not name this agent's install (written by an
		// evictd older than the marks, or taken over from another install)
		// is written at once: until then another install's uninstall would
		// take it.
		unmarked := e.install != "" && cur.Annotations[install.Annotation] != e.install
		if e.held && !dropped && !unmarked && in.Now.Before(e.due) && !(e.near && e.wrote > e.duration) {
			return Plan{Write: None, Wait: e.due.Sub(in.Now)}
		}
		return Plan{Write: Update, Lease: e.fill(l, in, false), Wait: RenewInterval(e.pace())}
	}
	e.held = false
	if !IsAgentIdentity(holder) {
		// Not an agent's Lease (a kubelet's heartbeat, whose holder is its
		// node's name, or anyone's): never taken over, however stale, and
		// this agent does not act. Looked at again every active duration.
		e.foreign, e.foreignHolder, e.holder, e.until, e.asked = true, holder, "", time.Time{}, false
		return Plan{Write: None, Wait: e.duration}
	}
	e.foreign = false
	expiry := expiresAt(cur)
	if holder != "" && in.Peer(holder).Gone && cur.Spec.RenewTime != nil {
		expiry = minTime(expiry, cur.Spec.RenewTime.Add(e.duration))
	}
	if !in.Now.Before(expiry) {
		l := e.fill(cur.DeepCopy(), in, true)
		delete(l.Annotations, AnnotationHandover)
		return Plan{Write: Update, Lease: l, Wait: renew}
	}
	e.holder, e.until = holder, expiry
	// Waiting: until it expires, or a watch event. The poll is a fallback
	// for a broken watch, and looks again, every active duration from the
	// holder's last renewal on, whether the holder is gone.
	wait := min(expiry.Sub(in.Now)+time.Millisecond, e.duration)
	if cur.Spec.RenewTime != nil {
		if gone := cur.Spec.RenewTime.Add(e.duration); gone.After(in.Now) {
			wait = min(wait, gone.Sub(in.Now)+time.Millisecond)
		}
	}
	if e.handedTo == "" && want != e.self && in.Peer(e.self).replaces(in.Peer(holder)) {
		l := cur.DeepCopy()
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationHandover] = e.self
		return Plan{Write: Update, Lease: l, Wait: wait}
	}
	e.asked = want == e.self
	return Plan{Write: None, Wait: wait}
}

// Wrote records the outcome of p's write: the Lease as the API server
// returned it, or the error (then nothing changes: a holder keeps acting
// until its last renewal ages out).
func (e *Elector) Wrote(p Plan, got *coordinationv1.Lease, err error) {
	if err != nil || p.Write == None || got == nil {
		return
	}
	holder := ""
	if got.Spec.HolderIdentity != nil {
		holder = *got.Spec.HolderIdentity
	}
	switch {
	case holder == e.self:
		e.held, e.handedTo, e.holder, e.asked = true, "", "", false
		if got.Spec.RenewTime != nil {
			e.renewed = got.Spec.RenewTime.Time
		}
		e.wrote = e.duration
		if got.Spec.LeaseDurationSeconds != nil {
			e.wrote = time.Duration(*got.Spec.LeaseDurationSeconds) * time.Second
		}
		interval := RenewInterval(e.wrote)
		e.due = e.renewed.Add(interval - time.Duration(renewJitter*e.jitter()*float64(interval)))
	case p.HandOver != "":
		e.held, e.handedTo, e.holder, e.until = false, p.HandOver, holder, expiresAt(got)
	default:
		// A handover asked for.
		e.held, e.asked, e.holder, e.until = false, true, holder, expiresAt(got)
	}
}

// Released records that the agent deleted its lease (or stopped holding it
// otherwise, at exit).
func (e *Elector) Released() { e.held = false }

// State is what readiness, the log and the metric show.
type State struct {
	// Acting: this agent holds the lease and acts.
	Acting bool
	// Holder is the other agent that holds it ("" when none is known).
	Holder string
	// Until is when the holder's lease expires, as last read.
	Until time.Time
	// HandedTo is the newer pod this agent handed over to.
	HandedTo string
	// Asked: this agent asked the holder for a handover.
	Asked bool
	// Foreign: the Lease under the agent's name is held by ForeignHolder,
	// not an agent's identity (IsAgentIdentity): not evictd's, left alone.
	Foreign       bool
	ForeignHolder string
}

// State returns the elector's state at now.
func (e *Elector) State(now time.Time) State {
	return State{Acting: e.Acting(now), Holder: e.holder, Until: e.until, HandedTo: e.handedTo, Asked: e.asked, Foreign: e.foreign, ForeignHolder: e.foreignHolder}
}

// fill makes l this agent's lease at in.Now: holder, duration, renewal,
// its install, and, when acquired (not a renewal), the acquisition.
func (e *Elector) fill(l *coordinationv1.Lease, in Input, acquire bool) *coordinationv1.Lease {
	l.Namespace, l.Name = e.namespace, Name(e.node)
	if e.install != "" {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[install.Annotation] = e.install
	}
	self := e.self
	l.Spec.HolderIdentity = &self
	l.Spec.LeaseDurationSeconds = ptr(int32(e.pace() / time.Second))
	l.Spec.RenewTime = micro(in.Now)
	if acquire || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = micro(in.Now)
		if l.ResourceVersion != "" {
			l.Spec.LeaseTransitions = ptr(transitions(l) + 1)
		}
	}
	if l.Spec.LeaseTransitions == nil {
		l.Spec.LeaseTransitions = ptr(int32(0))
	}
	e.setOwner(l, in.NodeUID)
	return l
}

// setOwner makes the Node the Lease's owner, so that the garbage collector
// deletes the Lease with the node. Not a controller reference, and no
// blockOwnerDeletion: that would need the delete permission on nodes.
func (e *Elector) setOwner(l *coordinationv1.Lease, uid types.UID) {
	if uid == "" {
		return
	}
	for _, r := range l.OwnerReferences {
		if r.Kind == "Node" && r.UID == uid {
			return
		}
	}
	l.OwnerReferences = append(l.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: e.node, UID: uid})
}

// expiresAt is when l's holder loses it: its renewal plus its duration. A
// lease without either has expired. Both agents on a node read one clock,
// so the holder's renewTime compares with the reader's own time.
func expiresAt(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func transitions(l *coordinationv1.Lease) int32 {
	if l.Spec.LeaseTransitions == nil {
		return 0
	}
	return *l.Spec.LeaseTransitions
}

func micro(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t)
	return &m
}

func ptr[T any](v T) *T { return &v }
