// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/internal/proc"
)

// joinCgroups is run by /bin/sh before the container's command: it writes
// its own pid into each cgroup.procs file given before "--" (v1: memory's
// and pids'; v2: the one unified file) and only then execs the command
// after it, so every page the command touches is charged to the
// container's cgroup from the first one.
const joinCgroups = `while [ "$1" != -- ]; do echo $$ > "$1" || exit 1; shift; done; shift; exec "$@"`

// JoinArgs are /bin/sh's arguments to run argv in the cgroups whose
// cgroup.procs files are procsFiles (see joinCgroups): the containers here,
// and any other process a test runs as a container would be (evictd in its
// own memory cgroup).
func JoinArgs(procsFiles []string, argv ...string) []string {
	args := append([]string{"-c", joinCgroups, "sh"}, procsFiles...)
	return append(append(args, "--"), argv...)
}

// defaultGrace is the API's default terminationGracePeriodSeconds.
const defaultGrace = 30 * time.Second

// cgroupRemoveTimeout bounds waiting for killed processes to leave a cgroup.
const cgroupRemoveTimeout = 10 * time.Second

type container struct {
	name    string
	image   string
	id      string // 64 hex digits, like a containerd id
	cgroup  cgroup
	proc    *proc.Proc
	logFile *os.File
	started time.Time

	// Set by the runner goroutine once the process has exited.
	exited   bool
	exitCode int32
	reason   string
	finished time.Time
	killedBy bool // the runner sent SIGKILL itself
	oomSeen  uint64
}

// podRunner plays the kubelet for one pod. Everything but update, markGone
// and pids runs on its own goroutine.
type podRunner struct {
	n     *Node
	log   *zap.Logger
	uid   types.UID
	podIP string

	updates  chan *corev1.Pod
	gone     chan struct{}
	goneOnce sync.Once
	exits    chan int
	evicts   chan evictCall
	done     chan struct{}

	pod         *corev1.Pod
	podCgroup   cgroup
	cgroupsMade bool // the pod cgroup is there to remove
	started     time.Time
	initDone    []*container
	terminal    bool // the processes are over: Succeeded or Failed
	podReason   string
	podMessage  string
	podOOMSeen  uint64
	// disruption is the DisruptionTarget condition of an eviction (Evict).
	disruption *corev1.PodCondition

	mu         sync.Mutex // guards containers against pids()
	containers []*container
}

func newPodRunner(n *Node, pod *corev1.Pod, podIP string) *podRunner {
	return &podRunner{
		n:       n,
		log:     n.log.With(zap.String("pod", pod.Namespace+"/"+pod.Name)),
		uid:     pod.UID,
		podIP:   podIP,
		updates: make(chan *corev1.Pod, 1),
		gone:    make(chan struct{}),
		exits:   make(chan int),
		evicts:  make(chan evictCall),
		done:    make(chan struct{}),
	}
}

// update hands over the newest version of the pod. Only dispatch calls it,
// under the node's lock, so there is one sender and a stale queued version
// can be replaced.
func (r *podRunner) update(pod *corev1.Pod) {
	select {
	case <-r.updates:
	default:
	}
	r.updates <- pod
}

func (r *podRunner) markGone() { r.goneOnce.Do(func() { close(r.gone) }) }

func (r *podRunner) pids() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, c := range r.containers {
		if !c.proc.Exited() {
			out[c.name] = c.proc.Pid()
		}
	}
	return out
}

func (r *podRunner) now() time.Time { return r.n.opts.Clock.Now() }

func (r *podRunner) record(f func(*Timeline)) { r.n.setTimeline(r.uid, f) }

func (r *podRunner) run() {
	defer close(r.done)
	ctx := r.n.runCtx()
	select {
	case r.pod = <-r.updates:
	case <-r.gone:
		return
	case <-ctx.Done():
		return
	}
	if r.pod.DeletionTimestamp == nil && !terminalPhase(r.pod.Status.Phase) {
		if err := r.start(ctx); err != nil {
			r.log.Warn("pod could not start", zap.Error(err))
			r.record(func(t *Timeline) { t.StartError = err.Error() })
			r.stopAll(syscall.SIGKILL)
			r.finish(ctx, corev1.PodFailed, "StartError", err.Error())
		}
	}

	tick := r.n.opts.Clock.NewTicker(r.n.opts.OOMPollInterval)
	defer tick.Stop()
	for {
		if r.pod.DeletionTimestamp != nil {
			r.terminate(ctx)
			return
		}
		select {
		case <-ctx.Done():
			r.teardown()
			return
		case <-r.gone:
			r.forceStop()
			return
		case p := <-r.updates:
			r.pod = p
		case i := <-r.exits:
			r.containerExited(ctx, i)
		case c := <-r.evicts:
			c.done <- r.evict(ctx, c.message)
		case <-tick.C():
			if !r.terminal {
				r.checkOOM(ctx)
			}
		}
	}
}

// start creates the pod's cgroup and directories, runs the init containers
// to completion, starts the containers and reports the pod Running.
func (r *podRunner) start(ctx context.Context) error {
	pod := r.pod
	podCg, err := r.n.cg.create(path.Join(r.n.CgroupRoot, PodCgroup(pod)))
	if err != nil {
		return err
	}
	r.podCgroup, r.cgroupsMade = podCg, true
	if err := podCg.setLimits(podMemoryLimit(pod), 0); err != nil {
		return err
	}
	facts := podFacts{hostIP: hostIP, podIP: r.podIP, emptyDirs: map[string]string{}}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		p := r.n.disk.emptyDir(r.uid, v.Name)
		if err := os.MkdirAll(p, 0o777); err != nil {
			return err
		}
		facts.emptyDirs[v.Name] = p
	}

	for i := range pod.Spec.InitContainers {
		c, err := r.startContainer(&pod.Spec.InitContainers[i], facts)
		if err != nil {
			return err
		}
		select {
		case <-c.proc.Done():
		case <-ctx.Done():
			c.proc.Stop(0)
			return ctx.Err()
		}
		r.noteExit(c)
		r.initDone = append(r.initDone, c)
		if c.exitCode != 0 {
			return fmt.Errorf("init container %s exited with %d", c.name, c.exitCode)
		}
	}

	for i := range pod.Spec.Containers {
		c, err := r.startContainer(&pod.Spec.Containers[i], facts)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.containers = append(r.containers, c)
		r.mu.Unlock()
	}
	started := r.containers
	r.started = r.now()
	r.record(func(t *Timeline) { t.Started = r.started })
	for i, c := range started {
		go func() {
			select {
			case <-c.proc.Done():
				select {
				case r.exits <- i:
				case <-r.done:
				}
			case <-r.done:
			}
		}()
	}
	if err := r.patchStatus(ctx); err != nil {
		return fmt.Errorf("report Running: %w", err)
	}
	r.record(func(t *Timeline) { t.Running = r.now() })
	r.log.Info("pod running", zap.String("cgroup", r.podCgroup.rel), zap.Int("containers", len(started)))
	return nil
}

func (r *podRunner) startContainer(spec *corev1.Container, facts podFacts) (*container, error) {
	idBytes := make([]byte, 32)
	if _, err := rand.Read(idBytes); err != nil {
		return nil, err
	}
	c := &container{name: spec.Name, image: spec.Image, id: hex.EncodeToString(idBytes)}
	cg := r.n.cg
	var err error
	if c.cgroup, err = cg.create(path.Join(r.podCgroup.rel, c.id)); err != nil {
		return nil, err
	}
	if err := c.cgroup.setLimits(containerMemoryLimit(spec), 0); err != nil {
		return nil, err
	}
	logDir := filepath.Join(r.n.disk.podLogDir(r.pod), spec.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(logDir, "0.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	c.logFile = f

	env := containerEnv(r.pod, spec, facts)
	cmd := exec.Command("/bin/sh", JoinArgs(cg.procsFiles(c.cgroup.rel), argv(spec, r.n.opts.WorkloadBin, env)...)...)
	cmd.Env = envList(env)
	cmd.Dir = spec.WorkingDir
	if cmd.Dir == "" {
		cmd.Dir = r.n.disk.podDir(r.uid)
		if err := os.MkdirAll(cmd.Dir, 0o755); err != nil {
			f.Close()
			return nil, err
		}
	}
	cmd.Stdout, cmd.Stderr = f, f
	p, err := proc.Start(cmd, r.n.opts.Clock)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("container %s: %w", spec.Name, err)
	}
	c.proc = p
	if err := awaitJoin(p, cg.procsFiles(c.cgroup.rel)); err != nil {
		p.Stop(0)
		f.Close()
		return nil, fmt.Errorf("container %s: %w", spec.Name, err)
	}
	c.started = r.now()
	return c, nil
}

// joinTimeout bounds how long a container's wrapper may take to join its
// cgroups; a shell needs milliseconds.
const joinTimeout = 10 * time.Second

// awaitJoin waits until the process is listed in every one of the
// cgroup.procs files, so that a container counts as started only once it
// is in its cgroups (as with a real runtime, which creates it there).
func awaitJoin(p *proc.Proc, procsFiles []string) error {
	want := strconv.Itoa(p.Pid())
	deadline := time.Now().Add(joinTimeout)
	for _, f := range procsFiles {
		for {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if slices.Contains(strings.Fields(string(b)), want) {
				break
			}
			if p.Exited() {
				return fmt.Errorf("exited before joining %s", filepath.Dir(f))
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pid %s did not join %s within %s", want, filepath.Dir(f), joinTimeout)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// noteExit fills in how an exited container ended, the way the kubelet
// reports it: exit code, or 128+signal for a signal.
func (r *podRunner) noteExit(c *container) {
	if c.exited {
		return
	}
	state, at, _ := c.proc.Result()
	c.exited, c.finished = true, at
	c.exitCode = int32(state.ExitCode())
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		c.exitCode = 128 + int32(ws.Signal())
	}
	if c.reason == "" {
		c.reason = "Completed"
		if c.exitCode != 0 {
			c.reason = "Error"
		}
	}
	c.logFile.Close()
}

func (r *podRunner) containerExited(ctx context.Context, i int) {
	c := r.containers[i]
	if c.exited || r.terminal {
		return
	}
	// The OOM killer signals its victim before it bumps the counter, so a
	// SIGKILL nobody here sent gets a moment before the counter is read.
	state, _, _ := c.proc.Result()
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && !c.killedBy {
		time.Sleep(50 * time.Millisecond)
	}
	if r.checkOOM(ctx) {
		return
	}
	r.noteExit(c)
	r.log.Info("container exited", zap.String("container", c.name), zap.Int32("exitCode", c.exitCode))
	for _, c := range r.containers {
		if !c.exited {
			if err := r.patchStatus(ctx); err != nil {
				r.log.Warn("could not report a container exit", zap.Error(err))
			}
			return
		}
	}
	phase := corev1.PodSucceeded
	for _, c := range r.containers {
		if c.exitCode != 0 {
			phase = corev1.PodFailed
		}
	}
	r.finish(ctx, phase, "", "")
}

// countOOM reads the OOM-kill counters of the pod's cgroups and returns how
// many kills happened since the last read, marking containers that had one.
func (r *podRunner) countOOM() int {
	if !r.cgroupsMade {
		return 0
	}
	var fresh uint64
	for _, c := range r.containers {
		k, err := r.n.cg.oomKills(c.cgroup.rel)
		if err != nil {
			continue // gone with its cgroup; its kills were read before
		}
		if k > c.oomSeen {
			fresh += k - c.oomSeen
			c.oomSeen = k
			c.reason = "OOMKilled"
		}
	}
	if k, err := r.n.cg.oomKills(r.podCgroup.rel); err == nil && k > r.podOOMSeen {
		fresh += k - r.podOOMSeen
		r.podOOMSeen = k
	}
	if fresh > 0 {
		r.n.addOOMKills(int(fresh))
		now := r.now()
		r.record(func(t *Timeline) {
			t.OOMKills += int(fresh)
			if t.OOMKilled.IsZero() {
				t.OOMKilled = now
			}
		})
	}
	return int(fresh)
}

// checkOOM fails the pod with reason OOMKilled when the kernel has killed
// any of its processes, and reports whether it did.
func (r *podRunner) checkOOM(ctx context.Context) bool {
	k := r.countOOM()
	if k == 0 {
		return false
	}
	r.log.Warn("kernel OOM kill in pod", zap.String("reason", "OOMKilled"), zap.Int("kills", k))
	r.stopAll(syscall.SIGKILL)
	r.finish(ctx, corev1.PodFailed, "OOMKilled", fmt.Sprintf("The kernel OOM killer killed %d process(es) of this pod.", k))
	return true
}

// finish makes the pod terminal: what still runs is killed, the cgroups are
// removed (the directories stay until the pod is deleted) and the phase is
// reported.
func (r *podRunner) finish(ctx context.Context, phase corev1.PodPhase, reason, message string) {
	r.stopAll(syscall.SIGKILL)
	r.countOOM()
	r.terminal, r.podReason, r.podMessage = true, reason, message
	r.removeCgroups()
	if err := r.patchTerminal(ctx, phase); err != nil {
		r.log.Warn("could not report the pod terminal", zap.Error(err))
	}
}

// evictCall asks the runner to evict its pod (Node.Evict).
type evictCall struct {
	message string
	done    chan error
}

// evict is the kubelet's eviction manager's eviction of the pod for a hard
// threshold: its containers are killed, its cgroups removed, and the
// status written as the kubelet's status manager writes it once the
// containers are gone: phase Failed, reason Evicted, the message, and the
// DisruptionTarget condition (reason TerminationByKubelet) stamped then.
// The pod stays in the API, Failed, as the kubelet leaves it.
func (r *podRunner) evict(ctx context.Context, message string) error {
	if r.terminal {
		return fmt.Errorf("nodesim: pod %s is over already (%s)", r.pod.Name, r.podReason)
	}
	r.stopAll(syscall.SIGKILL)
	r.countOOM()
	r.terminal, r.podReason, r.podMessage = true, "Evicted", message
	r.removeCgroups()
	at := r.now()
	r.disruption = &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonTerminationByKubelet, Message: message, LastTransitionTime: metav1.NewTime(at)}
	r.record(func(t *Timeline) { t.Evicted = at })
	r.log.Info("pod evicted", zap.String("message", message))
	return r.patchTerminal(ctx, corev1.PodFailed)
}

// stopAll sends sig to every running container's group and, for SIGKILL,
// waits until each has exited.
func (r *podRunner) stopAll(sig syscall.Signal) {
	for _, c := range r.containers {
		if c.proc.Exited() {
			continue
		}
		if sig == syscall.SIGKILL {
			c.killedBy = true
		}
		if err := c.proc.Signal(sig); err != nil {
			r.log.Warn("signal failed", zap.String("signal", sig.String()), zap.Error(err))
		}
	}
	if sig == syscall.SIGKILL {
		for _, c := range r.containers {
			<-c.proc.Done()
			r.noteExit(c)
		}
	}
}

// removeCgroups removes the containers' cgroups, then the pod's, each
// through the library's Delete (see cgroups.remove).
func (r *podRunner) removeCgroups() {
	if !r.cgroupsMade {
		return
	}
	for _, c := range append(slices.Clone(r.initDone), r.containers...) {
		if err := r.n.cg.remove(c.cgroup, cgroupRemoveTimeout); err != nil {
			r.log.Warn("could not remove a container cgroup", zap.String("container", c.name), zap.Error(err))
			return
		}
	}
	if err := r.n.cg.remove(r.podCgroup, cgroupRemoveTimeout); err != nil {
		r.log.Warn("could not remove the pod cgroup", zap.Error(err))
		return
	}
	r.cgroupsMade = false
}

func (r *podRunner) removeDirs() {
	for _, d := range []string{r.n.disk.podDir(r.uid), r.n.disk.podLogDir(r.pod)} {
		if err := os.RemoveAll(d); err != nil {
			r.log.Warn("could not remove a pod directory", zap.String("dir", d), zap.Error(err))
		}
	}
}

func deletionGrace(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultGrace
}

// terminate is the kubelet's answer to a deletionTimestamp: SIGTERM, the
// grace period, SIGKILL, cgroups and directories removed, then the API
// object deleted with grace 0.
func (r *podRunner) terminate(ctx context.Context) {
	grace := deletionGrace(r.pod)
	seen := r.now()
	r.record(func(t *Timeline) { t.DeletionSeen, t.GracePeriod = seen, grace })
	r.log.Info("pod deletion seen", zap.Duration("grace", grace))

	if hangsTermination(r.pod) {
		r.hang(ctx)
		return
	}
	if r.anyRunning() {
		// Timed before it is sent: a process that exits at once on SIGTERM
		// can be reaped, and its exit timed, before stopAll returns (seen
		// in CI: Exited 0.2 ms before a SIGTERM timed after the send).
		termAt := r.now()
		r.stopAll(syscall.SIGTERM)
		r.record(func(t *Timeline) { t.SIGTERM = termAt })
		allDone := make(chan struct{})
		go func() {
			for _, c := range r.containers {
				<-c.proc.Done()
			}
			close(allDone)
		}()
		deadline := r.n.opts.Clock.NewTimer(grace)
	wait:
		for {
			select {
			case <-allDone:
				deadline.Stop()
				break wait
			case <-deadline.C():
				r.log.Info("grace period over", zap.String("signal", "SIGKILL"))
				killAt := r.now()
				r.record(func(t *Timeline) { t.SIGKILL = killAt })
				r.stopAll(syscall.SIGKILL)
				break wait
			case <-ctx.Done():
				deadline.Stop()
				r.stopAll(syscall.SIGKILL)
				break wait
			case <-r.gone:
				deadline.Stop()
				r.stopAll(syscall.SIGKILL)
				break wait
			case p := <-r.updates:
				// A second delete may shorten the grace period, never lengthen it.
				// If the timer has fired already, its pending tick wins.
				if g := deletionGrace(p); g < grace && deadline.Stop() {
					deadline = r.n.opts.Clock.NewTimer(max(g-r.now().Sub(termAt), 0))
					grace = g
				}
				r.pod = p
			}
		}
		<-allDone
	}
	var last time.Time
	for _, c := range r.containers {
		r.noteExit(c)
		if c.finished.After(last) {
			last = c.finished
		}
	}
	if !last.IsZero() {
		r.record(func(t *Timeline) { t.Exited = last })
	}
	r.countOOM()
	rate, err := volumeRemovalRate(r.pod)
	if err != nil {
		r.log.Warn("volumes removed at once", zap.Error(err))
	}
	reported := false
	if rate > 0 && ctx.Err() == nil {
		// A slow disk: the final status first, then the volumes, file by
		// file, then the cgroups (VolumeRemovalRateAnnotation).
		if err := r.patchTerminal(ctx, corev1.PodFailed); err != nil && !apierrors.IsNotFound(err) {
			r.log.Debug("could not report the pod terminated", zap.Error(err))
		}
		reported = true
		r.removeVolumesSlowly(ctx, rate)
	}
	r.removeCgroups()
	r.removeDirs()
	r.record(func(t *Timeline) { t.CgroupRemoved = r.now() })
	if ctx.Err() != nil {
		return // the node is stopping; the API may be gone too
	}
	select {
	case <-r.gone:
		return
	default:
	}
	if !reported {
		if err := r.patchTerminal(ctx, corev1.PodFailed); err != nil && !apierrors.IsNotFound(err) {
			r.log.Debug("could not report the pod terminated", zap.Error(err))
		}
	}
	err = r.n.opts.Client.CoreV1().Pods(r.pod.Namespace).Delete(ctx, r.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(r.uid)},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.log.Warn("could not delete the pod", zap.Error(err))
		return
	}
	r.record(func(t *Timeline) { t.APIDeleted = r.now() })
	r.log.Info("pod deleted")
}

// hangsTermination reports whether the pod asks the stand-in to hang its
// termination (HangTerminationAnnotation).
func hangsTermination(pod *corev1.Pod) bool {
	return pod.Annotations[HangTerminationAnnotation] == "true"
}

// hang plays a termination that never completes, as with a hung runtime or
// a process stuck in uninterruptible sleep: SIGTERM goes out, but no SIGKILL
// follows, nothing is cleaned up and no status is written, so the pod stays
// in the API with its deletionTimestamp and phase Running, and whatever its
// processes hold stays held. Only the end of the node or the pod's removal
// from the API (a forced delete) ends them.
func (r *podRunner) hang(ctx context.Context) {
	if r.anyRunning() {
		termAt := r.now() // before the send, as in terminate
		r.stopAll(syscall.SIGTERM)
		r.record(func(t *Timeline) { t.SIGTERM = termAt })
	}
	hungAt := r.now()
	r.record(func(t *Timeline) { t.Hung = hungAt })
	r.log.Info("termination hangs: SIGTERM sent, no SIGKILL will follow", zap.String("annotation", HangTerminationAnnotation))
	for {
		select {
		case <-ctx.Done():
			r.teardown()
			return
		case <-r.gone:
			r.forceStop()
			return
		case p := <-r.updates:
			r.pod = p
		}
	}
}

func (r *podRunner) anyRunning() bool {
	for _, c := range r.containers {
		if !c.proc.Exited() {
			return true
		}
	}
	return false
}

// forceStop handles a pod removed from the API while it still ran (a
// forced delete): its processes get SIGKILL at once.
func (r *podRunner) forceStop() {
	now := r.now()
	r.record(func(t *Timeline) {
		if t.DeletionSeen.IsZero() {
			t.DeletionSeen = now
		}
	})
	r.teardown()
	r.record(func(t *Timeline) { t.CgroupRemoved = r.now() })
}

// teardown stops everything without talking to the API.
func (r *podRunner) teardown() {
	r.stopAll(syscall.SIGKILL)
	r.countOOM()
	r.removeCgroups()
	r.removeDirs()
}

// patchStatus reports the running pod: phase Running, Ready when every
// container runs.
func (r *podRunner) patchStatus(ctx context.Context) error {
	return r.sendStatus(ctx, r.status(corev1.PodRunning))
}

func (r *podRunner) patchTerminal(ctx context.Context, phase corev1.PodPhase) error {
	return r.sendStatus(ctx, r.status(phase))
}

func (r *podRunner) status(phase corev1.PodPhase) corev1.PodStatus {
	ready := phase == corev1.PodRunning
	var statuses []corev1.ContainerStatus
	for _, c := range r.containers {
		cs := containerStatus(c)
		ready = ready && cs.Ready
		statuses = append(statuses, cs)
	}
	var initStatuses []corev1.ContainerStatus
	for _, c := range r.initDone {
		initStatuses = append(initStatuses, containerStatus(c))
	}
	started := metav1.NewTime(r.started)
	if r.started.IsZero() {
		started = metav1.NewTime(r.now())
	}
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(r.now())}
	}
	conditions := []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, phase == corev1.PodRunning),
		cond(corev1.PodInitialized, len(r.initDone) == len(r.pod.Spec.InitContainers)),
		cond(corev1.ContainersReady, ready),
		cond(corev1.PodReady, ready),
		cond(corev1.PodScheduled, true),
	}
	if r.disruption != nil {
		conditions = append([]corev1.PodCondition{*r.disruption}, conditions...)
	}
	return corev1.PodStatus{
		Phase:                 phase,
		Reason:                r.podReason,
		Message:               r.podMessage,
		Conditions:            conditions,
		HostIP:                hostIP,
		HostIPs:               []corev1.HostIP{{IP: hostIP}},
		PodIP:                 r.podIP,
		PodIPs:                []corev1.PodIP{{IP: r.podIP}},
		StartTime:             &started,
		ContainerStatuses:     statuses,
		InitContainerStatuses: initStatuses,
	}
}

func containerStatus(c *container) corev1.ContainerStatus {
	sum := sha256.Sum256([]byte(c.image))
	cs := corev1.ContainerStatus{
		Name:        c.name,
		Image:       c.image,
		ImageID:     "sha256:" + hex.EncodeToString(sum[:]),
		ContainerID: "containerd://" + c.id,
		Started:     ptr.To(!c.exited),
		Ready:       !c.exited,
	}
	if c.exited {
		cs.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: c.exitCode, Reason: c.reason, ContainerID: cs.ContainerID,
			StartedAt: metav1.NewTime(c.started), FinishedAt: metav1.NewTime(c.finished),
		}
	} else {
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.started)}
	}
	return cs
}

// sendStatus writes the status subresource with a strategic merge patch
// that carries the pod's UID, so a newer pod of the same name is never
// touched (the kubelet's status manager does the same).
func (r *podRunner) sendStatus(ctx context.Context, st corev1.PodStatus) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": r.uid},
		"status":   st,
	})
	if err != nil {
		return err
	}
	_, err = r.n.opts.Client.CoreV1().Pods(r.pod.Namespace).Patch(ctx, r.pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
