// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Peer is a node-level OOM daemon operators deploy instead of evictd, as
// Debian packages it (hack/vm/prepare.sh puts the packages in the guest's
// systemd layer, never enabled): a run starts it beside the kubelet and
// stops it after, leaving the node as it was.
type Peer struct {
	Name string
	// Comm is its process's name in /proc/PID/comm, for its own cost.
	Comm string
	// Start and Stop are shell run in the guest; Check succeeds once the
	// peer runs and watches what it should, and says what it watches.
	Start, Stop, Check string
}

// earlyoomTunedArgs are earlyoom's flags as its README advises for a
// server: never the node's own daemons (--avoid), act at the kubelet's
// level of available memory and no lower, report every minute, and run at
// a high priority so that it is not starved itself.
const earlyoomTunedArgs = `-m 10 -s 10 -r 60 -p --avoid '^(systemd|systemd-journal|dbus-daemon|kubelet|containerd|containerd-shim-runc-v2|evictd|vmagent)$'`

// The peers of issue 35.
var (
	// PeerEarlyoom: Debian's earlyoom with its packaged defaults (-r 3600
	// in /etc/default/earlyoom: SIGTERM at 10 % available memory and
	// 10 % free swap, to the process with the highest oom_score).
	PeerEarlyoom = Peer{Name: "earlyoom", Comm: "earlyoom",
		Start: "systemctl start earlyoom",
		Stop:  "systemctl stop earlyoom",
		Check: "systemctl is-active earlyoom && journalctl -b -u earlyoom -o cat --no-pager | grep 'sending SIGTERM when' | tail -1",
	}
	// PeerEarlyoomTuned: the same with earlyoomTunedArgs, through a
	// runtime drop-in that Stop removes.
	PeerEarlyoomTuned = Peer{Name: "earlyoom (tuned)", Comm: "earlyoom",
		Start: "mkdir -p /run/systemd/system/earlyoom.service.d && printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/earlyoom %s\\n' " +
			shellQuote(earlyoomTunedArgs) + " >/run/systemd/system/earlyoom.service.d/tuned.conf && systemctl daemon-reload && systemctl restart earlyoom",
		Stop: "systemctl stop earlyoom; rm -rf /run/systemd/system/earlyoom.service.d && systemctl daemon-reload",
		Check: "systemctl is-active earlyoom && journalctl -b -u earlyoom -o cat --no-pager | grep -E 'sending SIGTERM when|avoid' | tail -2 && " +
			"systemctl show -p ExecStart earlyoom | grep -q -- '--avoid'",
	}
	// PeerOomd: systemd-oomd with ManagedOOMMemoryPressure=kill on
	// kubepods.slice at its documented limit and duration (the defaults:
	// DefaultMemoryPressureLimit 60 %, Debian's
	// DefaultMemoryPressureDurationSec 20 s), and Debian's ManagedOOMSwap=kill
	// on the root slice, which watches a node with swap (Check prints that
	// watch when there is one).
	PeerOomd = Peer{Name: "systemd-oomd", Comm: "systemd-oomd",
		Start: "systemctl set-property --runtime kubepods.slice ManagedOOMMemoryPressure=kill && systemctl start systemd-oomd",
		Stop:  "systemctl stop systemd-oomd systemd-oomd.socket; systemctl set-property --runtime kubepods.slice ManagedOOMMemoryPressure=auto",
		Check: "systemctl is-active systemd-oomd && oomctl | grep -A2 'Memory Pressure Monitored CGroups' | grep 'Path: /kubepods.slice' && " +
			"{ oomctl | grep -A3 'Swap Monitored CGroups' || true; }",
	}
)

// Peers are the peers, in the order of the table.
var Peers = []Peer{PeerEarlyoom, PeerEarlyoomTuned, PeerOomd}

// StartPeer starts p and waits until its Check passes; it returns what
// Check printed.
func (n *Node) StartPeer(ctx context.Context, p Peer) (string, error) {
	if out, err := n.Sh(ctx, p.Start); err != nil {
		return "", fmt.Errorf("starting %s: %w\n%s", p.Name, err, out)
	}
	var out string
	err := n.poll(ctx, 60*time.Second, p.Name+" running", func(ctx context.Context) error {
		var err error
		out, err = n.Sh(ctx, p.Check)
		return err
	})
	if err != nil {
		status, _ := n.Sh(ctx, "systemctl status --no-pager -l earlyoom systemd-oomd 2>&1 | tail -n 30; journalctl -b --no-pager -o cat -u earlyoom -u systemd-oomd | tail -n 20")
		return "", fmt.Errorf("%s: %w\n%s", p.Name, err, status)
	}
	return strings.TrimSpace(out), nil
}

// StopPeer stops p and puts the node back as it was.
func (n *Node) StopPeer(ctx context.Context, p Peer) error {
	if out, err := n.Sh(ctx, p.Stop); err != nil {
		return fmt.Errorf("stopping %s: %w\n%s", p.Name, err, out)
	}
	if out, err := n.Sh(ctx, "systemctl is-active earlyoom systemd-oomd || true"); err != nil || strings.Contains(out, "\nactive") || strings.HasPrefix(out, "active") {
		return fmt.Errorf("%s still runs after its stop (%v): %q", p.Name, err, out)
	}
	return nil
}

// ByDaemon is a pod fate: a container ended while nothing evicted it and
// the kernel did not OOM-kill it in its own limit, the way earlyoom
// (SIGTERM, then SIGKILL) and systemd-oomd (SIGKILL to the whole cgroup)
// end processes. The bench's pods never end by themselves, so any exit
// counts: the workload exits 0 on SIGTERM.
const ByDaemon = "daemon"

// PeerFateOf says who ended p: FateOf, or ByDaemon.
func PeerFateOf(p *corev1.Pod) string {
	if by := FateOf(p); by != "" {
		return by
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return ByDaemon
		}
	}
	return ""
}

// oomKillMemcgRE finds the pod UID in a kernel OOM kill's summary line
// (oom-kill:...,task_memcg=/kubepods.slice/...-pod<uid>.slice/...,task=...),
// its dashes underscores under the systemd driver.
var oomKillMemcgRE = regexp.MustCompile(`oom-kill:.*task_memcg=\S*?pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)

// OOMKilledPods are the UIDs of the pods the kernel's OOM killer took a
// process of, from dmesg: a container it killed outside its own limit
// shows no OOMKilled, only exit 137, which PeerFateOf would give a daemon.
func OOMKilledPods(dmesg string) map[string]bool {
	out := map[string]bool{}
	for _, m := range oomKillMemcgRE.FindAllStringSubmatch(dmesg, -1) {
		out[strings.ReplaceAll(m[1], "_", "-")] = true
	}
	return out
}

// PeerRun is one scenario under one configuration of make bench-peers.
type PeerRun struct {
	Config, Scenario string
	// Want is the pod the kubelet's documented order evicts first in the
	// scenario, written down before the run; Critical the pods no one may
	// end (system-node-critical), Guarded those a PodDisruptionBudget
	// allows no disruption of.
	Want              string
	Critical, Guarded []string
	// Ends are the pods ended, in order, and by whom.
	Ends     []PodFate
	OOMKills int64
	Samples  []MemorySample
	// Unresponsive: how long the guest had not answered when the run was
	// given up (its OOM kills then unknown).
	Unresponsive time.Duration
	// Usage is the daemon's own cost in the run (nil when none runs).
	Usage *DaemonUsage
}

// Wrong are the pods ended that the kubelet's order would have left: all
// but Want, which alone relieves each scenario.
func (r PeerRun) Wrong() []string {
	var out []string
	for _, e := range r.Ends {
		if e.Pod != r.Want {
			out = append(out, e.Pod)
		}
	}
	return out
}

func (r PeerRun) hit(names []string) []string {
	var out []string
	for _, e := range r.Ends {
		if slices.Contains(names, e.Pod) {
			out = append(out, e.Pod)
		}
	}
	return out
}

// Relief is how long memory.available stayed under threshold from its
// first crossing; false when it never crossed, or never came back.
func (r PeerRun) Relief(threshold int64) (time.Duration, bool) {
	first := FirstBelow(r.Samples, threshold)
	if first.IsZero() {
		return 0, false
	}
	for _, s := range r.Samples {
		if s.At.After(first) && s.Available >= threshold {
			return s.At.Sub(first), true
		}
	}
	return 0, false
}

// PeersTable lays the runs out as docs/performance.md shows them.
func PeersTable(runs []PeerRun, threshold int64) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "scenario\tconfiguration\tOOM kills\tended, in order\twrong victims\tPDB violations\tcritical hit\tunder %d MiB for\tlowest available\n", threshold>>20)
	for _, r := range runs {
		var ends []string
		for _, e := range r.Ends {
			ends = append(ends, e.Pod+" ("+e.By+")")
		}
		ooms, relief := strconv.FormatInt(r.OOMKills, 10), "not crossed"
		if r.Unresponsive > 0 {
			ooms = "unknown (livelocked " + r.Unresponsive.Round(time.Second).String() + "+)"
		}
		if d, ok := r.Relief(threshold); ok {
			relief = d.Round(100 * time.Millisecond).String()
		} else if !FirstBelow(r.Samples, threshold).IsZero() {
			relief = "not relieved"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d MiB\n", r.Scenario, r.Config, ooms, orNone(strings.Join(ends, ", ")),
			orNone(strings.Join(r.Wrong(), ", ")), len(r.hit(r.Guarded)), orNone(strings.Join(r.hit(r.Critical), ", ")), relief, lowestOf(r.Samples)>>20)
	}
	w.Flush()
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func lowestOf(samples []MemorySample) int64 {
	return RaceRun{Samples: samples}.MinAvailable()
}
