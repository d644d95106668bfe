// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/explain"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/thresholds"
)

// explainSynopsis names every flag of explain but --help; a test walks the
// flag set to keep it so.
const explainSynopsis = "evictd explain { --summary FILE --pods FILE [--config FILE] [--namespaces FILE] | " +
	"--node NODE [--address HOST:PORT] [--kubeconfig FILE] [--namespace NS] [--selector SELECTOR] " +
	"[--certificate-authority FILE] [--token-file FILE] [--insecure-skip-tls-verify] [--request-timeout DURATION] } [--signal SIGNAL] [-o text|json]"

const explainUsage = `Usage: ` + explainSynopsis + `

Explains what evictd sees on a node and what it would do there: every
signal against evictd's thresholds, what evictd would do next (the pod it
evicts, or what it waits for, and why), what must be freed, which pods
would be evicted in which order and what each frees, and every pod's place
in each signal's order with the reason, or why it cannot be chosen. The
decision is the agent's own: its decision code, not a restatement of it.

With --node, from the running agent on that node: its last pass, with what
only it knows (pods in flight, refused, blocked by a PodDisruptionBudget
until when, how long each threshold has been met). It is asked on its secure port
(--secure-bind-address) with your bearer token; you need get on
nodes/explain in the API group evictd.io (the ClusterRole
evictd-explain-reader of deploy/daemonset.yaml; the chart's is named in
its install notes).
The agent is reached at its pod's IP, or at --address (the local end of
kubectl port-forward).

Otherwise from files captured on a cluster (the same files evictd rank
takes), by one pass of the agent's loop over them that does not act.

The thresholds are those of --config, or evictd's defaults. A running agent
may have placed its own above the kubelet's (its "evictd starting" log line
lists the ones it uses): give them in --config to explain with those.
What only a running agent knows (pods in flight, PodDisruptionBudget
refusals, how long a soft threshold has held) is not in a capture.

--signal keeps one signal's explanation (memory.available,
nodefs.available, ...); a signal evictd has no threshold for explains
nothing.

Flags:
`

type explainFlags struct {
	captureFiles
	live   liveFlags
	signal string
	output string
	help   bool
}

func newExplainFlags() (*explainFlags, *pflag.FlagSet) {
	f := &explainFlags{}
	fs := cliflag.NewFlagSet("explain")
	f.captureFiles.bind(fs, "EvictdConfiguration file (thresholds, priority groups, exclusions).")
	f.live.bind(fs, "Explain the running agent on this node (its secure port, as the caller: needs get on nodes/explain in the API group evictd.io).")
	fs.StringVar(&f.signal, "signal", "", "Explain this eviction signal only (memory.available, nodefs.available, ...); empty: every signal evictd has a threshold for.")
	fs.StringVarP(&f.output, "output", "o", "text", "Output format: text or json.")
	fs.BoolVarP(&f.help, flagHelp, "h", false, "Print this help and exit.")
	return f, fs
}

// explainCmd runs `evictd explain` on captured data (no cluster access) or
// asks a running agent (--node, --address).
func explainCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, fs := newExplainFlags()
	if err := fs.Parse(args); err != nil {
		return flagError(stderr, "explain", err)
	}
	if f.help {
		fmt.Fprint(stdout, explainUsage)
		fmt.Fprint(stdout, fs.FlagUsagesWrapped(helpColumns))
		return exitOK
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "evictd explain: %v\n", err)
		return exitUsage
	}
	if f.output != "json" && f.output != "text" {
		return fail(fmt.Errorf("invalid --output (-o) %q: want text or json", f.output))
	}
	if err := checkExplainSignal(f.signal); err != nil {
		return fail(err)
	}
	if f.live.node != "" || f.live.address != "" {
		return explainRunning(ctx, f, fs, stdout, stderr)
	}
	for _, name := range liveOnly {
		if fs.Changed(name) {
			return fail(fmt.Errorf("--%s is for a running agent: give --node NODE", name))
		}
	}
	if err := f.captureFiles.check(fs); err != nil {
		return fail(err)
	}
	c, err := loadCapture("explain", f.captureFiles, stderr)
	if err != nil {
		return fail(err)
	}
	if _, err := c.cfg.Thresholds(); err != nil {
		return fail(err)
	}
	live, err := agent.ExplainCapture(agent.Capture{Config: c.cfg, Rank: c.opts, Pods: c.pods,
		Observation: &pressure.Observation{Summary: c.summary.summary, Node: pressure.NodeExtras{DiskLayout: c.summary.diskLayout}}})
	if err != nil {
		return fail(err)
	}
	rep := f.narrow(live.Report)
	if f.output == "json" {
		err = writeJSON(stdout, rep)
	} else {
		err = writeExplanation(stdout, rep, thresholds.Signal(f.signal))
	}
	if err != nil {
		fmt.Fprintf(stderr, "evictd explain: writing output: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// checkExplainSignal refuses a --signal that names no signal evictd knows,
// naming the ones it does. memory.highStuck is among them: explain reports
// it, though no threshold map sets it.
func checkExplainSignal(name string) error {
	if name == "" || thresholds.Signal(name).Valid() {
		return nil
	}
	known := make([]string, 0, len(thresholds.Signals()))
	for _, s := range thresholds.Signals() {
		known = append(known, string(s))
	}
	hint := ""
	if strings.HasPrefix(name, "containerfs.") {
		// As in the kubelet: the writable layers' filesystem's signals
		// stand for containerfs.
		hint = " (containerfs is explained as nodefs or imagefs, the filesystem the writable layers are on)"
	}
	return fmt.Errorf("invalid --signal %q: want one of %s%s", name, strings.Join(known, ", "), hint)
}

// narrow keeps --signal's entry of the report, or all of them without it.
func (f *explainFlags) narrow(rep explain.Report) explain.Report {
	if f.signal == "" {
		return rep
	}
	return rep.Only(thresholds.Signal(f.signal))
}

// liveOnly are the flags that only a running agent's explanation takes.
var liveOnly = []string{"kubeconfig", "namespace", "selector", "address", "certificate-authority", "token-file",
	"insecure-skip-tls-verify", "request-timeout"}

// explainRunning asks the running agent on --node (or at --address).
func explainRunning(ctx context.Context, f *explainFlags, fs *pflag.FlagSet, stdout, stderr io.Writer) int {
	for _, name := range []string{"summary", "pods", "config", "namespaces"} {
		if fs.Changed(name) {
			fmt.Fprintf(stderr, "evictd explain: --%s is for a capture, not a running agent (--node)\n", name)
			return exitUsage
		}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "evictd explain: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if f.live.timeout <= 0 {
		fmt.Fprintf(stderr, "evictd explain: invalid --request-timeout %v: want a positive duration\n", f.live.timeout)
		return exitUsage
	}
	live, err := explainLive(ctx, f.live)
	if err != nil {
		fmt.Fprintf(stderr, "evictd explain: %v\n", err)
		return exitFailure
	}
	live.Report = f.narrow(live.Report)
	if f.output == "json" {
		err = writeJSON(stdout, live)
	} else {
		err = writeLive(stdout, live, thresholds.Signal(f.signal))
	}
	if err != nil {
		fmt.Fprintf(stderr, "evictd explain: writing output: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// writeLive prints a running agent's explanation: who and when, then the
// report (of only, when --signal asked for one).
func writeLive(w io.Writer, live agent.Live, only thresholds.Signal) error {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s", live.Node)
	switch {
	case live.ObservedAt.IsZero():
		b.WriteString(": the agent has made no observation yet\n")
		_, err := io.WriteString(w, b.String())
		return err
	case live.StandingBy:
		fmt.Fprintf(&b, ", observed at %s, standing by (another agent holds the node's lease): signals only\n", live.ObservedAt.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintf(&b, ", observed at %s", live.ObservedAt.UTC().Format(time.RFC3339))
		if live.DryRun {
			b.WriteString(", dry run (nothing is evicted)")
		}
		b.WriteString("\n")
	}
	b.WriteByte('\n')
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return writeExplanation(w, live.Report, only)
}

// writeExplanation prints the report for people: a paragraph per signal.
// only is the signal --signal asked for, or empty; a report narrowed to a
// signal evictd has no threshold for says so rather than print nothing.
func writeExplanation(w io.Writer, rep explain.Report, only thresholds.Signal) error {
	if only != "" && len(rep.Signals) == 0 {
		_, err := fmt.Fprintf(w, "%s: evictd has no threshold for this signal, so it never acts on it\n", only)
		return err
	}
	var b strings.Builder
	for i, s := range rep.Signals {
		if i > 0 {
			b.WriteByte('\n')
		}
		if !s.Measured {
			fmt.Fprintf(&b, "%s: not measured; its thresholds cannot be met\n", s.Signal)
			continue
		}
		fmt.Fprintf(&b, "%s: %s available of %s\n", s.Signal, formatAmount(s.Signal, s.Available), formatAmount(s.Signal, s.Capacity))
		for _, t := range s.Thresholds {
			fmt.Fprintf(&b, "  threshold %s: %s\n", t.Threshold, thresholdState(t))
		}
		if d := s.Decision; d != nil {
			fmt.Fprintf(&b, "  evictd %s\n", d.Why)
		}
		if s.Signal.Stall() || s.Signal.MemoryHigh() {
			// Its need is in µs of stall or a container's: one pod at a time.
			for _, st := range s.Next {
				fmt.Fprintf(&b, "  the first to go would be: %d. %s/%s\n", st.Rank, st.Namespace, st.Name)
			}
			if err := writePods(&b, s.Pods); err != nil {
				return err
			}
			continue
		}
		switch {
		case s.Need > 0 && s.Decision != nil && s.Decision.Action == explain.ActionWait:
			fmt.Fprintf(&b, "  to free: %s; once evictd acts again, in order:\n", formatAmount(s.Signal, s.Need))
		case s.Need > 0:
			when := "now"
			if s.NeedAfterGrace {
				when = "after the grace period"
			}
			fmt.Fprintf(&b, "  to free: %s (%s); would evict, in order:\n", formatAmount(s.Signal, s.Need), when)
		case len(s.Next) > 0:
			b.WriteString("  nothing to free; the first to go would be:\n")
		default:
			b.WriteString("  nothing to free, and no pod that could be evicted\n")
		}
		for _, st := range s.Next {
			if st.Unknown {
				fmt.Fprintf(&b, "    %d. %s/%s, freeing an unknown amount (no usage figure): evictd waits until it is gone and looks again\n",
					st.Rank, st.Namespace, st.Name)
				continue
			}
			fmt.Fprintf(&b, "    %d. %s/%s, freeing %s (%s available after)\n", st.Rank, st.Namespace, st.Name,
				formatAmount(s.Signal, st.Frees), formatAmount(s.Signal, st.AvailableAfter))
		}
		if s.Short > 0 {
			fmt.Fprintf(&b, "    every pod that could go leaves %s still to free\n", formatAmount(s.Signal, s.Short))
		}
		if err := writePods(&b, s.Pods); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writePods prints a signal's pods in its eviction order, with why.
func writePods(b *strings.Builder, pods []explain.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	b.WriteString("  pods, in eviction order:\n")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    RANK\tPOD\tWHY")
	for _, p := range pods {
		pos := "-"
		if p.Rank > 0 {
			pos = fmt.Sprint(p.Rank)
		}
		fmt.Fprintf(tw, "    %s\t%s/%s\t%s\n", pos, p.Namespace, p.Name, p.Why)
	}
	return tw.Flush()
}

// thresholdState says where a threshold stands: not met, met and acted
// on, waiting out its grace period, or held by its minimum reclaim.
func thresholdState(t explain.Threshold) string {
	held := ""
	if t.HeldFor != "" && t.HeldFor != "0s" {
		held = " for " + t.HeldFor
	}
	switch {
	case t.HeldByMinReclaim:
		return "no longer met, held by its minimum reclaim (acted on" + held + ")"
	case t.Met && t.Hard:
		return "met" + held + ": evictd acts at once"
	case t.Met && t.Active:
		return fmt.Sprintf("met%s, past its %s grace period: evictd acts", held, t.Grace)
	case t.Met && t.GraceLeft != "":
		return fmt.Sprintf("met%s of its %s grace period: evictd acts in %s if it holds", held, t.Grace, t.GraceLeft)
	case t.Met:
		return "met: evictd acts once it has held for its grace period"
	}
	return "not met"
}
