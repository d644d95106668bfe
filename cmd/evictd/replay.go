// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/trace"
	"github.com/evictd/evictd/pkg/trace/play"
)

// replaySynopsis names every flag of replay but --help.
const replaySynopsis = "evictd replay --trace FILE [--config FILE [--config FILE]] [-o text|json]"

const replayUsage = `Usage: ` + replaySynopsis + `

Runs evictd's decisions again over a trace (evictd trace), offline, on the
trace's own clock: each pass sees what the agent observed then and the
times the agent read its clock at, and each eviction call gets the answer
the agent got. Prints what would have been evicted, when and why.

Without --config, with the recorded agent's configuration (its flags and
its --config file, and its thresholds placed above the kubelet's against
what the trace keeps the agent read: the kubelet's thresholds, its image
collection thresholds, the capacities and disk layout, at start and at each
placement while it ran), and says whether the replay made the recorded
calls. Each pass is compared with the agent's (the thresholds, the calls,
the clock readings): a pass done otherwise DIVERGED, is printed with what
the agent and the replay did, and makes the exit status 1. With one
--config, with that configuration instead: the file replaces the recorded
one and the recorded flags that set what a config file sets (thresholds,
grace periods, minimum reclaim, the transition period, ...); the other
flags stay. It prints where the decisions differ from the recorded ones,
and the passes it could not compare: those whose clock it read more or
fewer times than the agent, deciding with times the agent never read.
With two, where the two configurations differ.

A trace of an older evictd (format 4 or before) does not keep all of
that: the replay says what it does not know ("not in the trace"), takes
the kubelet's defaults for it, and calls what it did otherwise not
comparable rather than diverged.

The node's figures stay those recorded: a pod a replay evicts that the
agent did not keeps its usage in later passes, so after the first
difference a replay says what the configuration would have done first,
not how the node would have gone on. A call the agent did not make gets
an accepted eviction (a dry run's verdict in dry run).

Flags:
`

type replayFlags struct {
	trace   string
	configs []string
	output  string
	help    bool
}

func newReplayFlags() (*replayFlags, *pflag.FlagSet) {
	f := &replayFlags{}
	fs := cliflag.NewFlagSet("replay")
	fs.StringVar(&f.trace, "trace", "", "Trace file (evictd trace -o FILE), gzipped or not.")
	fs.StringArrayVar(&f.configs, "config", nil, "EvictdConfiguration to replay with in place of the recorded one; twice to compare two.")
	fs.StringVarP(&f.output, "output", "o", "text", "Output format: text or json.")
	fs.BoolVarP(&f.help, flagHelp, "h", false, "Print this help and exit.")
	return f, fs
}

func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, fs := newReplayFlags()
	if err := fs.Parse(args); err != nil {
		return flagError(stderr, "replay", err)
	}
	if f.help {
		fmt.Fprint(stdout, replayUsage)
		fmt.Fprint(stdout, fs.FlagUsagesWrapped(helpColumns))
		return exitOK
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "evictd replay: %s\n", oneLine(err))
		return code
	}
	switch {
	case fs.NArg() > 0:
		return fail(exitUsage, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	case f.trace == "":
		return fail(exitUsage, errors.New("give --trace FILE"))
	case len(f.configs) > 2:
		return fail(exitUsage, fmt.Errorf("--config given %d times: at most two configurations are compared", len(f.configs)))
	case f.output != "text" && f.output != "json":
		return fail(exitUsage, fmt.Errorf("invalid --output (-o) %q: want text or json", f.output))
	}
	data, err := os.ReadFile(f.trace)
	if err != nil {
		return fail(exitUsage, fmt.Errorf("--trace: %w", err))
	}
	for _, c := range f.configs {
		if _, err := config.Load(c); err != nil {
			return fail(exitUsage, fmt.Errorf("--config %s: %w", c, err))
		}
	}
	// Each replay reads the trace afresh: the loop keeps what it is given.
	run := func(configPath string) (*agent.ReplayResult, error) {
		tr, err := trace.Read(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("--trace %s: %w", f.trace, err)
		}
		o, err := options.FromTrace(tr.Header, configPath)
		if err != nil {
			return nil, err
		}
		return agent.Replay(ctx, o, tr, nil)
	}
	tr, err := trace.Read(bytes.NewReader(data))
	if err != nil {
		return fail(exitUsage, fmt.Errorf("--trace %s: %w", f.trace, err))
	}
	rep := replayReport{Trace: describeTrace(tr), Node: tr.Header.Node, Passes: len(tr.Passes), Dropped: tr.Header.Dropped}
	base := runReport{Name: recordedAgent, Calls: play.RecordedCalls(tr)}
	runs := f.configs
	if len(runs) == 0 {
		runs = []string{""}
	}
	var got []runReport
	for _, c := range runs {
		res, err := run(c)
		if err != nil {
			return fail(exitFailure, err)
		}
		name := "the recorded configuration"
		if c != "" {
			name = c
		}
		r := runReport{Name: name, Thresholds: res.Thresholds, Placed: res.Placed, Left: res.Left, DryRun: res.DryRun, Calls: res.Calls,
			Unknown: res.Unknown}
		r.Diverged, r.NotComparable = res.Judge(c == "")
		if len(r.NotComparable) > 0 {
			r.NotComparableWhy = notComparableOther
			if c == "" {
				r.NotComparableWhy = notComparableUnknown
			}
		}
		got = append(got, r)
	}
	rep.Runs = got
	if len(got) == 2 {
		rep.Against, rep.Differences = got[0].Name, diffCalls(got[0], got[1])
	} else {
		rep.Against, rep.Differences = base.Name, diffCalls(base, got[0])
		rep.Recorded = base.Calls
	}
	if f.output == "json" {
		err = writeJSON(stdout, rep)
	} else {
		err = writeReplay(stdout, rep)
	}
	if err != nil {
		return fail(exitFailure, fmt.Errorf("writing output: %w", err))
	}
	for _, r := range got {
		switch {
		case len(r.Diverged) > 0:
			// A replay that cannot make the agent's decisions with what the
			// agent had is a failure of the replay (or of the trace).
			return fail(exitFailure, fmt.Errorf("the replay with %s diverged from the recorded agent in %d pass(es), first in pass %d",
				r.Name, len(r.Diverged), r.Diverged[0].Pass))
		case len(r.Unknown) > 0 && r.NotComparableWhy == notComparableUnknown:
			fmt.Fprintf(stderr, "evictd replay: warning: trace format %d does not keep everything the agent read (\"not in the trace\"): %d pass(es) done otherwise are not comparable\n",
				tr.Header.Format, len(r.NotComparable))
		}
	}
	return exitOK
}

// Why passes are not comparable (runReport.NotComparableWhy).
const (
	notComparableUnknown = "the trace does not keep everything the agent read: what the replay did otherwise may come of what it took instead"
	notComparableOther   = "the replay read the clock more or fewer times than the agent: it decided there with times the agent never read"
)

// maxPassesShown bounds the diverged passes the text lists (-o json lists
// them all).
const maxPassesShown = 20

// recordedAgent names the recorded calls in a comparison.
const recordedAgent = "the recorded agent"

// replayReport is what `evictd replay` prints.
type replayReport struct {
	Trace   string `json:"trace"`
	Node    string `json:"node"`
	Passes  int    `json:"passes"`
	Dropped uint64 `json:"dropped,omitempty"`
	// Recorded are the calls the agent made, when compared with.
	Recorded []play.Call `json:"recorded,omitempty"`
	Runs     []runReport `json:"runs"`
	// Against names what the last run is compared with: the recorded
	// calls, or the first configuration.
	Against     string   `json:"against"`
	Differences []string `json:"differences"`
}

type runReport struct {
	Name       string   `json:"name"`
	Thresholds []string `json:"thresholds,omitempty"`
	// Placed are the thresholds the run switched to where the agent placed
	// its own anew (the kubelet restarted with others).
	Placed []agent.ReplayPlacement `json:"placed,omitempty"`
	// Left are the thresholds the replay could not run, and why.
	Left   []string    `json:"left,omitempty"`
	DryRun bool        `json:"dryRun,omitempty"`
	Calls  []play.Call `json:"calls"`
	// Unknown is what the agent read that the trace does not keep, and
	// what the replay did without it.
	Unknown []string `json:"unknown,omitempty"`
	// Diverged are the passes a replay with the recorded configuration
	// did otherwise than the agent, with everything the agent read known:
	// other thresholds, calls or clock readings. NotComparable are those
	// done otherwise that cannot be told a divergence or a configuration's
	// difference, NotComparableWhy says why.
	Diverged         []agent.PassDiff `json:"diverged,omitempty"`
	NotComparable    []agent.PassDiff `json:"notComparable,omitempty"`
	NotComparableWhy string           `json:"notComparableWhy,omitempty"`
}

// diffCalls lists, call by call, where b's decisions differ from a's;
// none when b made a's calls (the same pods, passes, ranks and reasons).
func diffCalls(a, b runReport) []string {
	var out []string
	for i := range max(len(a.Calls), len(b.Calls)) {
		switch {
		case i >= len(a.Calls):
			out = append(out, fmt.Sprintf("call %d: only with %s: %s", i+1, b.Name, describeCall(b.Calls[i])))
		case i >= len(b.Calls):
			out = append(out, fmt.Sprintf("call %d: only with %s: %s", i+1, a.Name, describeCall(a.Calls[i])))
		case !a.Calls[i].Same(b.Calls[i]):
			out = append(out, fmt.Sprintf("call %d: %s: %s; %s: %s", i+1, a.Name, describeCall(a.Calls[i]), b.Name, describeCall(b.Calls[i])))
		}
	}
	return out
}

func describeCall(c play.Call) string {
	kind := "soft"
	if c.Hard {
		kind = "hard"
	}
	s := fmt.Sprintf("pass %d at %s, %s for %s (%s), rank %d: %s", c.Pass, c.Launched.UTC().Format(timeLayout), c.Pod, c.Signal, kind, c.Rank, c.Reason)
	if c.RunnerUp != "" {
		s += "; next in line " + c.RunnerUp
	}
	return s
}

func writeReplay(w io.Writer, rep replayReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "trace: %s\n", rep.Trace)
	for _, r := range rep.Runs {
		fmt.Fprintf(&b, "\nreplayed with %s", r.Name)
		if len(r.Thresholds) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(r.Thresholds, ", "))
		}
		if r.DryRun {
			b.WriteString(", a dry run")
		}
		fmt.Fprintf(&b, ": %d eviction call(s)\n", len(r.Calls))
		for _, pl := range r.Placed {
			fmt.Fprintf(&b, "from pass %d on, placed anew above the kubelet's: %s\n", pl.Pass, strings.Join(pl.Thresholds, ", "))
		}
		for _, l := range r.Left {
			fmt.Fprintf(&b, "not replayed: %s\n", l)
		}
		for _, u := range r.Unknown {
			fmt.Fprintf(&b, "not in the trace: %s\n", u)
		}
		if len(r.Calls) > 0 {
			tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PASS\tTIME\tPOD\tSIGNAL\tRANK\tANSWER\tREASON")
			for _, c := range r.Calls {
				sig := c.Signal + " (soft)"
				if c.Hard {
					sig = c.Signal + " (hard)"
				}
				reason := c.Reason
				if c.RunnerUp != "" {
					reason += "; next in line " + c.RunnerUp
				}
				answer := c.Result
				switch {
				case answer == "":
					answer = "under way"
				case !c.Recorded:
					answer += " (assumed)"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", c.Pass, c.Launched.UTC().Format(timeLayout), c.Pod, sig, c.Rank, answer, reason)
			}
			_ = tw.Flush()
		}
		writePassDiffs(&b, r)
	}
	b.WriteString("\n")
	last := rep.Runs[len(rep.Runs)-1].Name
	switch {
	case len(rep.Differences) == 0 && rep.Against == recordedAgent:
		fmt.Fprintf(&b, "%s made the recorded agent's %d call(s): the same pods, passes, ranks and reasons\n", last, len(rep.Recorded))
	case len(rep.Differences) == 0:
		fmt.Fprintf(&b, "%s and %s make the same calls\n", rep.Against, last)
	default:
		fmt.Fprintf(&b, "where %s differs from %s:\n", last, rep.Against)
		for _, d := range rep.Differences {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writePassDiffs writes the passes r diverged in, each with what the agent
// and the replay did, and those it could not compare.
func writePassDiffs(b *strings.Builder, r runReport) {
	if len(r.Diverged) > 0 {
		fmt.Fprintf(b, "DIVERGED from the recorded agent in %d pass(es):\n", len(r.Diverged))
		for i, d := range r.Diverged {
			if i == maxPassesShown {
				fmt.Fprintf(b, "  ... and %d more (-o json lists them all)\n", len(r.Diverged)-i)
				break
			}
			fmt.Fprintf(b, "  pass %d: the agent %s; the replay %s\n", d.Pass, describeDid(d.Agent, d.Thresholds), describeDid(d.Replay, d.Thresholds))
		}
	}
	if len(r.NotComparable) > 0 {
		passes := make([]string, 0, len(r.NotComparable))
		for _, d := range r.NotComparable {
			passes = append(passes, fmt.Sprint(d.Pass))
		}
		if len(passes) > maxPassesShown {
			passes = append(passes[:maxPassesShown], fmt.Sprintf("... (%d in all)", len(r.NotComparable)))
		}
		fmt.Fprintf(b, "not comparable with the recorded agent in %d pass(es) (%s): %s\n", len(r.NotComparable), r.NotComparableWhy, strings.Join(passes, ", "))
	}
}

// describeDid is what a pass did: its thresholds (when they differ), its
// calls and its clock readings.
func describeDid(d agent.PassDid, thresholds bool) string {
	var parts []string
	if thresholds {
		parts = append(parts, "decided with "+strings.Join(d.Thresholds, ", "))
	}
	if len(d.Calls) == 0 {
		parts = append(parts, "made no call")
	}
	for _, c := range d.Calls {
		kind := "soft"
		if c.Hard {
			kind = "hard"
		}
		parts = append(parts, fmt.Sprintf("called for %s (%s, %s, rank %d: %s)", c.Pod, c.Signal, kind, c.Rank, c.Reason))
	}
	if d.Readings >= 0 {
		parts = append(parts, fmt.Sprintf("read the clock %d times", d.Readings))
	}
	return strings.Join(parts, ", ")
}
