// SPDX-License-Identifier: Apache-2.0

package shadow

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
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
type Recorder struct {
	readOOM func() (int64, error)
	emit    func(Report)
	now     func() time.Time // when a kubelet eviction was seen (AtSeen)

	mu      sync.Mutex
	open    map[string]*openEpisode
	kubelet []Action
	reports []Report
}

type openEpisode struct {
	ep       Episode
	oomStart int64 // -1: unknown
}

// NewRecorder reports through emit (the log line); readOOM counts the
// node's OOM kills so far (OOMKills).
func NewRecorder(readOOM func() (int64, error), emit func(Report)) *Recorder {
	return &Recorder{readOOM: readOOM, emit: emit, now: time.Now, open: map[string]*openEpisode{}}
}

// KubeletEvicted records the kubelet's eviction of p, a pod of this node,
// if p says it was evicted (KubeletEviction); other pods are ignored. The
// informer passes the same pod more than once (turned Failed, deleted,
// listed again): the first sight is kept.
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
}

// EpisodeStarted opens resource's episode at at.
func (r *Recorder) EpisodeStarted(resource string, at time.Time) {
	oom := r.oom()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[resource] = &openEpisode{ep: Episode{Resource: resource, Start: at}, oomStart: oom}
}

// WouldEvict records a dry-run eviction made for resource's episode.
func (r *Recorder) WouldEvict(resource string, a Action) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.open[resource]; o != nil && len(o.ep.WouldEvict) < MaxWouldEvict {
		o.ep.WouldEvict = append(o.ep.WouldEvict, a)
	}
}

// EpisodeEnded closes resource's episode at at and reports it.
func (r *Recorder) EpisodeEnded(resource string, at time.Time) {
	oom := r.oom()
	r.mu.Lock()
	o := r.open[resource]
	delete(r.open, resource)
	if o == nil {
		r.mu.Unlock()
		return
	}
	o.ep.End = at
	kills := int64(-1)
	if oom >= 0 && o.oomStart >= 0 {
		kills = oom - o.oomStart
	}
	rep := Compare(o.ep, r.kubelet, kills)
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
	data, err := os.ReadFile(path)
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
