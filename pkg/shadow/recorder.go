// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/pkg/hostpaths/hostfile"
)

// Limits of what a Recorder keeps: the kubelet's recent evictions (an
// episode's are needed until it ends), the last reports, and the
// would-be evictions of one episode (a node that stays short for hours
// must not grow the agent).
const (
	MaxKubelet    = 512
	MaxReports    = 32
	MaxWouldEvict = 256
)

// Recorder gathers, while a dry-run agent runs, each episode and the
// kubelet's evictions, and reports each episode as it ends. Safe for use
// from several goroutines (the loop, the pod informer, the server).
//
// The loop tells it, at each pass, the episodes that started, then the
// pass itself (Pass: the OOM kills since the pass before), then the
// episodes that ended.
type Recorder struct {
	readOOM func() (int64, error)
	emit    func(Report)
	now     func() time.Time // when a kubelet eviction was seen (AtSeen)
	// start is when the recorder began: the kubelet's evictions dated
	// before it (the informer lists the node's pods evicted long ago) are
	// kept for the reports but not counted.
	start time.Time

	mu      sync.Mutex
	counts  Counter
	open    map[string]*openEpisode
	kubelet []Action
	reports []Report
	// lastOOM is the node's OOM-kill count at the last pass; -1 when it
	// could not be read.
	lastOOM int64
}

type openEpisode struct {
	ep       Episode
	oomStart int64 // -1: unknown
}

// Counter counts what the recorder sees, for the fleet (pkg/metrics'
// evictd_shadow_*; *metrics.Metrics is one). Every label value comes from
// a closed set: the loop's resources and signals, KubeletResources,
// Firsts, OOMOutsideEpisodes.
type Counter interface {
	// ShadowWouldEvict counts one would-be eviction for resource's episode.
	ShadowWouldEvict(resource, signal string)
	// ShadowKubeletEviction counts one of the kubelet's evictions on the
	// node, by what it evicted for (KubeletResource).
	ShadowKubeletEviction(resource string)
	// ShadowOOMKills counts n OOM kills on the node while episode's
	// episode was under way (OOMOutsideEpisodes: none was).
	ShadowOOMKills(episode string, n int64)
	// ShadowEpisode counts an episode of resource that ended, by who
	// acted first in it (Firsts).
	ShadowEpisode(resource, first string)
}

// NewRecorder reports through emit (the log line); readOOM counts the
// node's OOM kills so far (OOMKills), read now for the first pass's
// baseline and then at each pass.
func NewRecorder(readOOM func() (int64, error), emit func(Report)) *Recorder {
	r := &Recorder{readOOM: readOOM, emit: emit, now: time.Now, open: map[string]*openEpisode{}}
	r.start = r.now()
	r.lastOOM = r.oom()
	return r
}

// CountInto has the recorder count what it sees into c from now on.
func (r *Recorder) CountInto(c Counter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = c
}

// KubeletEvicted records the kubelet's eviction of p, a pod of this node,
// if p says it was evicted (KubeletEviction); other pods are ignored. The
// informer passes the same pod more than once (turned Failed, deleted,
// listed again): the first sight is kept, and counted if the eviction is
// not dated before the recorder's start. The pods evictd evicts itself are
// never among them: an eviction through the API deletes the pod, which the
// kubelet then stops without the reason Evicted, and in shadow mode evictd
// evicts nothing anyway.
func (r *Recorder) KubeletEvicted(p *v1.Pod) {
	a, ok := KubeletEviction(p, r.now())
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.kubelet {
		if k.UID == a.UID && k.Pod == a.Pod {
			return
		}
	}
	if len(r.kubelet) >= MaxKubelet {
		r.kubelet = r.kubelet[1:]
	}
	r.kubelet = append(r.kubelet, a)
	// The pod's times are whole seconds, truncated.
	if r.counts != nil && !a.At.Before(r.start.Truncate(time.Second)) {
		r.counts.ShadowKubeletEviction(KubeletResource(a.Why))
	}
}

// EpisodeStarted opens resource's episode at at. Its OOM kills count from
// the pass before: the kill that came with the pressure, before the pass
// that saw the threshold crossed, is the episode's.
func (r *Recorder) EpisodeStarted(resource string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[resource] = &openEpisode{ep: Episode{Resource: resource, Start: at}, oomStart: r.lastOOM}
}

// Pass reads the node's OOM-kill count at the pass at at, after the
// pass's episodes started and before they end: the kills since the pass
// before are counted under the episode under way (oomEpisode) and are the
// first of each open episode that had none.
func (r *Recorder) Pass(at time.Time) {
	n := r.oom()
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.lastOOM
	r.lastOOM = n
	if n < 0 || prev < 0 || n <= prev {
		return
	}
	for _, o := range r.open {
		if o.ep.FirstOOMKill.IsZero() {
			o.ep.FirstOOMKill = at
		}
	}
	if r.counts != nil {
		r.counts.ShadowOOMKills(oomEpisode(r.open), n-prev)
	}
}

// WouldEvict records, and counts, a dry-run eviction made for resource's
// episode.
func (r *Recorder) WouldEvict(resource string, a Action) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts != nil {
		r.counts.ShadowWouldEvict(resource, a.Signal)
	}
	if o := r.open[resource]; o != nil && len(o.ep.WouldEvict) < MaxWouldEvict {
		o.ep.WouldEvict = append(o.ep.WouldEvict, a)
	}
}

// EpisodeEnded closes resource's episode at at, reports it, and counts
// who acted first in it. Its OOM kills are those up to the pass's read
// (Pass).
func (r *Recorder) EpisodeEnded(resource string, at time.Time) {
	r.mu.Lock()
	o := r.open[resource]
	delete(r.open, resource)
	if o == nil {
		r.mu.Unlock()
		return
	}
	o.ep.End = at
	kills := int64(-1)
	if r.lastOOM >= 0 && o.oomStart >= 0 {
		kills = r.lastOOM - o.oomStart
	}
	rep := Compare(o.ep, r.kubelet, kills)
	if r.counts != nil {
		r.counts.ShadowEpisode(resource, rep.First)
	}
	if len(r.reports) >= MaxReports {
		r.reports = r.reports[1:]
	}
	r.reports = append(r.reports, rep)
	r.mu.Unlock()
	if r.emit != nil {
		r.emit(rep)
	}
}

// Reports returns the last reports, oldest first.
func (r *Recorder) Reports() []Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Report(nil), r.reports...)
}

func (r *Recorder) oom() int64 {
	if r.readOOM == nil {
		return -1
	}
	n, err := r.readOOM()
	if err != nil {
		return -1
	}
	return n
}

// VMStatOOMKills reads the kernel's count of OOM kills since boot, the
// oom_kill line of /proc/vmstat (Linux 4.13 and later): every OOM kill on
// the node, of a pod's process or any other, whichever limit it hit.
func VMStatOOMKills(path string) (int64, error) {
	// Read at every shadow pass: bounded and never blocking, as every host
	// file evictd reads (/proc/vmstat is some 5 KiB).
	data, err := hostfile.Read(path, hostfile.ProcLimit)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, ok := bytes.Cut(sc.Bytes(), []byte{' '})
		if !ok || string(name) != "oom_kill" {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s: oom_kill %q is not a count", path, value)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s: no oom_kill line (a kernel before 4.13?)", path)
}
