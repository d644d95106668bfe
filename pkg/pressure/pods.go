// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Indexes of Observer.pods, one per directory pods sit in.
const (
	qosGuaranteed = iota // directly in kubepods
	qosBurstable
	qosBestEffort
)

func qosClass(i int) v1.PodQOSClass {
	switch i {
	case qosBurstable:
		return v1.PodQOSBurstable
	case qosBestEffort:
		return v1.PodQOSBestEffort
	}
	return v1.PodQOSGuaranteed
}

// podEntry is a pod cgroup the observer knows, kept across passes so its
// paths, strings and open files are built once.
type podEntry struct {
	uid     string
	qos     v1.PodQOSClass
	rel     string // cgroup relative to the hierarchy roots
	v2      bool
	gen     uint64 // pass in which the pod was last listed
	warned  bool   // a warning was logged; later ones go to debug until it reads well
	usage   file   // memory.usage_in_bytes or memory.current
	stat    file   // memory.stat
	events  file   // v2 memory.events
	psi     file   // cgroup2 memory.pressure
	pids    file   // pids.current
	nameSet bool   // namespace and name came from /var/log/pods
	// namespace and name, from the pod's /var/log/pods directory
	namespace, name string
	logDir          string
	eph             ephemeralState
	// swap and swapMax: v2 memory.swap.current and memory.swap.max, or v1
	// memory.memsw.usage_in_bytes (see swapFiles); no path when the kernel
	// has none.
	swap, swapMax file
}

func (e *podEntry) close(open *int) {
	e.usage.close(open)
	e.stat.close(open)
	e.events.close(open)
	e.psi.close(open)
	e.pids.close(open)
	e.swap.close(open)
	e.swapMax.close(open)
}

// key names the pod in logs: namespace/name when known, else its UID.
func (e *podEntry) key() string {
	if e.nameSet {
		return e.namespace + "/" + e.name
	}
	return e.uid
}

// podSample is what one pass read from a pod.
type podSample struct {
	e         *podEntry
	usage     uint64
	stat      memStat
	psi       statsv1alpha1.PSIStats
	hasPSI    bool
	events    MemoryEvents
	hasEvents bool
	pids      uint64
	hasPids   bool
	swap      swapSample
}

func (o *Observer) listDir(p cpath, fn func(name []byte, typ uint8)) error {
	if o.trace != nil {
		o.trace(p, true)
	}
	return listDirC(p, o.dbuf, fn)
}

// gone reports whether a read failed because the cgroup was removed: open
// fails with ENOENT, a kept-open kernfs file with ENODEV.
func gone(err error) bool {
	return err == unix.ENOENT || err == unix.ENODEV
}

// listPods lists kubepods and its QoS directories, keeps o.active to the pods
// seen in this pass (sorted by UID) and forgets the others.
func (o *Observer) listPods(obs *Observation) bool {
	k := o.kubepods
	o.gen++
	o.active = o.active[:0]
	newPods := 0
	note := func(qos int, parent string, name, raw []byte) {
		e := o.pods[qos][string(name)]
		if e == nil {
			e = o.newPod(qos, parent, string(name), raw)
			o.pods[qos][string(name)] = e
			newPods++
		}
		e.gen = o.gen
		o.active = append(o.active, e)
	}
	var hasBurstable, hasBestEffort bool
	err := o.listDir(k.dir, func(name []byte, typ uint8) {
		if typ != dtDir && typ != dtUnknown {
			return
		}
		switch kind, raw := classifyChild(k.driver, k.prefix, name); kind {
		case childPod:
			note(qosGuaranteed, "", name, raw)
		case childBurstable:
			hasBurstable = true
		case childBestEffort:
			hasBestEffort = true
		}
	})
	if err != nil {
		if !gone(err) {
			obs.SkippedFiles++
			o.log.Warn("cannot list the kubepods cgroup", zap.String("dir", k.dir.String()), zap.Error(err))
			return false
		}
		o.dropKubepods()
		o.prune()
		return false
	}
	for _, q := range [...]struct {
		has  bool
		qos  int
		name string
		dir  cpath
	}{{hasBurstable, qosBurstable, k.burstable, k.burstableDir}, {hasBestEffort, qosBestEffort, k.besteffort, k.besteffortDir}} {
		if !q.has {
			continue
		}
		err := o.listDir(q.dir, func(name []byte, typ uint8) {
			if typ != dtDir && typ != dtUnknown {
				return
			}
			if kind, raw := classifyChild(k.driver, k.prefix, name); kind == childPod {
				note(q.qos, q.name, name, raw)
			}
		})
		if err != nil && !gone(err) {
			obs.SkippedFiles++
			o.log.Warn("cannot list a QoS cgroup", zap.String("dir", q.dir.String()), zap.Error(err))
		}
	}
	o.newPods = newPods
	o.prune()
	slices.SortFunc(o.active, func(a, b *podEntry) int { return strings.Compare(a.uid, b.uid) })
	return true
}

// prune forgets pods that were not listed in this pass.
func (o *Observer) prune() {
	known := 0
	for _, m := range o.pods {
		known += len(m)
	}
	if known == len(o.active) {
		return
	}
	for _, m := range o.pods {
		for name, e := range m {
			if e.gen != o.gen {
				e.close(&o.openFiles)
				delete(m, name)
			}
		}
	}
}

// newPod sets up a pod found in the directory parent of kubepods ("" for
// Guaranteed pods). It checks once which optional files exist, so a pass
// does not pay for failed opens.
func (o *Observer) newPod(qos int, parent, name string, rawUID []byte) *podEntry {
	rel := path.Join(o.kubepods.rel, parent, name)
	memDir := filepath.Join(o.hier.memory, rel)
	e := &podEntry{uid: podUID(rawUID), qos: qosClass(qos), rel: rel, v2: o.hier.mode == ModeV2,
		events: file{fd: -1}, psi: file{fd: -1}, pids: file{fd: -1}}
	e.stat = newFile(filepath.Join(memDir, "memory.stat"))
	if e.v2 {
		e.usage = newFile(filepath.Join(memDir, "memory.current"))
		e.events = newFile(filepath.Join(memDir, "memory.events"))
	} else {
		e.usage = newFile(filepath.Join(memDir, "memory.usage_in_bytes"))
	}
	optional := func(dir, name string) file {
		if dir == "" {
			return file{fd: -1}
		}
		p := newCPath(filepath.Join(dir, rel, name))
		if !existsC(p) {
			return file{fd: -1}
		}
		return file{path: p, fd: -1}
	}
	e.psi = optional(o.hier.unified, "memory.pressure")
	e.pids = optional(o.hier.pids, "pids.current")
	e.swap, e.swapMax = swapFiles(e.v2, memDir)
	return e
}

// readPods reads every listed pod into o.samples and returns how many
// were read whole; listed is false when kubepods could not be listed.
// swap says whether to read their swap files.
func (o *Observer) readPods(obs *Observation, swap bool) (n int, listed bool) {
	if !o.listPods(obs) {
		return 0, false
	}
	if cap(o.samples) < len(o.active) {
		o.samples = make([]podSample, len(o.active), len(o.active)+len(o.active)/4)
	}
	samples := o.samples[:len(o.active)]
	for _, e := range o.active {
		s := &samples[n]
		*s = podSample{e: e}
		switch o.readPod(obs, e, s, swap) {
		case podOK:
			n++
		case podGone:
			obs.VanishedPods++
		case podBad:
			obs.SkippedPods++
		}
	}
	o.samples = samples
	return n, true
}

type podResult int

const (
	podOK podResult = iota
	podGone
	podBad
)

func (o *Observer) readPod(obs *Observation, e *podEntry, s *podSample, swap bool) podResult {
	b, err := o.read(&e.usage)
	if err != nil {
		return o.podReadErr(obs, e, &e.usage, err)
	}
	if s.usage, err = parseUint(b); err != nil {
		return o.podBad(obs, e, &e.usage, b, err)
	}
	if swap && e.swap.path != nil {
		// Right after the usage: on v1 the swap is memsw minus it.
		if r := o.readPodSwap(obs, e, s); r != podOK {
			return r
		}
	}
	if b, err = o.read(&e.stat); err != nil {
		return o.podReadErr(obs, e, &e.stat, err)
	}
	if s.stat, err = parseMemoryStat(b, e.v2); err != nil {
		return o.podBad(obs, e, &e.stat, b, err)
	}
	if e.events.path != nil {
		if b, err = o.read(&e.events); err != nil {
			return o.podReadErr(obs, e, &e.events, err)
		}
		if s.events, err = parseMemoryEvents(b); err != nil {
			return o.podBad(obs, e, &e.events, b, err)
		}
		s.hasEvents = true
	}
	if e.psi.path != nil {
		b, err = o.read(&e.psi)
		switch {
		case err == unix.EOPNOTSUPP:
			// PSI is off for this cgroup (cgroup.pressure=0) or the kernel:
			// stop asking.
			e.psi.path = nil
		case err != nil:
			return o.podReadErr(obs, e, &e.psi, err)
		default:
			if s.psi, err = parsePSI(b); err != nil {
				return o.podBad(obs, e, &e.psi, b, err)
			}
			s.hasPSI = true
		}
	}
	if e.pids.path != nil {
		if b, err = o.read(&e.pids); err != nil {
			return o.podReadErr(obs, e, &e.pids, err)
		}
		if s.pids, err = parseUint(b); err != nil {
			return o.podBad(obs, e, &e.pids, b, err)
		}
		s.hasPids = true
	}
	if e.warned {
		e.warned = false
		o.log.Info("pod files are readable again", zap.String("pod", e.key()), zap.String("uid", e.uid))
	}
	return podOK
}

// readPodSwap reads a pod's swap files: v2 memory.swap.current, and
// memory.swap.max for what is left unless it is "max"; v1
// memory.memsw.usage_in_bytes minus the usage just read (floored at 0: the
// two are read a moment apart).
func (o *Observer) readPodSwap(obs *Observation, e *podEntry, s *podSample) podResult {
	b, err := o.read(&e.swap)
	if err != nil {
		return o.podReadErr(obs, e, &e.swap, err)
	}
	v, err := parseUint(b)
	if err != nil {
		return o.podBad(obs, e, &e.swap, b, err)
	}
	if !e.v2 {
		v = sub0(v, s.usage)
	}
	if e.swapMax.path != nil {
		if b, err = o.read(&e.swapMax); err != nil {
			return o.podReadErr(obs, e, &e.swapMax, err)
		}
		limit, err := parseLimit(b)
		if err != nil {
			return o.podBad(obs, e, &e.swapMax, b, err)
		}
		if limit != unlimited {
			s.swap.avail, s.swap.availOK = sub0(limit, v), true
		}
	}
	s.swap.usage, s.swap.ok = v, true
	return podOK
}

// podReadErr handles a failed read: a vanished cgroup is normal and quiet;
// anything else skips the pod with a warning.
func (o *Observer) podReadErr(obs *Observation, e *podEntry, f *file, err error) podResult {
	if gone(err) {
		return podGone
	}
	return o.podBad(obs, e, f, nil, err)
}

// podBad skips a pod whose file is malformed or unreadable. The warning
// names the file and its content; it is logged once per pod until the pod
// reads well again, so a broken file does not flood the log at every pass.
func (o *Observer) podBad(obs *Observation, e *podEntry, f *file, content []byte, err error) podResult {
	obs.SkippedFiles++
	fields := []zap.Field{zap.String("pod", e.key()), zap.String("uid", e.uid), zap.String("file", f.path.String()), zap.Error(err)}
	if content != nil {
		fields = append(fields, zap.String("content", quoteContent(content)))
	}
	if e.warned {
		o.log.Debug("skipping pod: file still unusable", fields...)
	} else {
		e.warned = true
		o.log.Warn("skipping pod: unusable file", fields...)
	}
	return podBad
}

// logIndex maps pod UIDs to their /var/log/pods directories, which name the
// pod's namespace and name.
type logIndex struct {
	dir   cpath
	byUID map[string]logEntry
	at    time.Time
}

type logEntry struct {
	namespace, name, dir string
}

// refreshNames gives pods their namespace and name. /var/log/pods is listed
// again when a pod appeared in this pass, or when a pod still has no name and
// the last listing is older than the ephemeral refresh period (the kubelet
// may create the log directory a moment after the cgroup).
func (o *Observer) refreshNames(now time.Time) {
	missing := false
	for _, e := range o.active {
		if !e.nameSet {
			missing = true
			break
		}
	}
	if !missing {
		return
	}
	if o.newPods == 0 && o.logs.byUID != nil && now.Sub(o.logs.at) < o.opts.EphemeralRefresh {
		return
	}
	idx := map[string]logEntry{}
	base := o.logs.dir.String()
	err := listDirC(o.logs.dir, o.dbuf, func(name []byte, typ uint8) {
		if typ != dtDir && typ != dtUnknown {
			return
		}
		if ns, n, uid, ok := parseLogDirName(name); ok {
			idx[string(uid)] = logEntry{namespace: string(ns), name: string(n), dir: filepath.Join(base, string(name))}
		}
	})
	if err != nil && !gone(err) {
		o.log.Warn("cannot list pod log directories", zap.String("dir", base), zap.Error(err))
	}
	o.logs.byUID, o.logs.at = idx, now
	for _, e := range o.active {
		if le, ok := idx[e.uid]; ok && !e.nameSet {
			e.namespace, e.name, e.logDir, e.nameSet = le.namespace, le.name, le.dir, true
			// The log directory adds to the pod's ephemeral storage: measure it soon.
			e.eph.at = time.Time{}
		}
	}
}
