// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/explain"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
)

// explainSynopsis names every flag of explain but --help; a test walks the
// flag set to keep it so.
const explainSynopsis = "evictd explain --summary FILE --pods FILE [--config FILE] [--namespaces FILE] [-o text|json]"

const explainUsage = `Usage: ` + explainSynopsis + `

Explains what evictd sees on a node and what it would do there, from files
captured on a cluster (the same files evictd rank takes): every signal
against evictd's thresholds, what must be freed, which pods would be
evicted in which order and what each frees, and every pod's place in each
signal's order with the reason, or why it can never be chosen.

The thresholds are those of --config, or evictd's defaults. A running agent
may have placed its own above the kubelet's (its "evictd starting" log line
lists the ones it uses): give them in --config to explain with those.
What only a running agent knows (pods in flight, PodDisruptionBudget
refusals, how long a soft threshold has held) is not in a capture.

Flags:
`

type explainFlags struct {
	captureFiles
	output string
	help   bool
}

func newExplainFlags() (*explainFlags, *pflag.FlagSet) {
	f := &explainFlags{}
	fs := cliflag.NewFlagSet("explain")
	f.captureFiles.bind(fs, "EvictdConfiguration file (thresholds, priority groups, exclusions).")
	fs.StringVarP(&f.output, "output", "o", "text", "Output format: text or json.")
	fs.BoolVarP(&f.help, flagHelp, "h", false, "Print this help and exit.")
	return f, fs
}

// explainCmd runs `evictd explain` on captured data: no cluster access.
func explainCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
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
	if err := f.captureFiles.check(fs); err != nil {
		return fail(err)
	}
	switch {
	case f.output != "json" && f.output != "text":
		return fail(fmt.Errorf("invalid --output (-o) %q: want text or json", f.output))
	}
	c, err := loadCapture("explain", f.captureFiles, stderr)
	if err != nil {
		return fail(err)
	}
	ths, err := c.cfg.Thresholds()
	if err != nil {
		return fail(err)
	}
	rep := explain.Explain(explain.Input{
		Thresholds: ths,
		Signals:    thresholds.Observe(c.summary.summary),
		Rank: func(s thresholds.Signal) []rank.Candidate {
			return rank.Rank(s, c.summary.summary, c.pods, c.opts).Candidates
		},
	})
	if f.output == "json" {
		err = writeJSON(stdout, rep)
	} else {
		err = writeExplanation(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "evictd explain: writing output: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// writeExplanation prints the report for people: a paragraph per signal.
func writeExplanation(w io.Writer, rep explain.Report) error {
	var b strings.Builder
	for i, s := range rep.Signals {
		if i > 0 {
			b.WriteByte('\n')
		}
		if !s.Measured {
			fmt.Fprintf(&b, "%s: not measured in this capture; its thresholds cannot be met\n", s.Signal)
			continue
		}
		fmt.Fprintf(&b, "%s: %s available of %s\n", s.Signal, formatAmount(s.Signal, s.Available), formatAmount(s.Signal, s.Capacity))
		for _, t := range s.Thresholds {
			state := "not met"
			switch {
			case t.Met && t.Hard:
				state = "met: evictd acts at once"
			case t.Met:
				state = "met: evictd acts once it has held for its grace period"
			}
			fmt.Fprintf(&b, "  threshold %s: %s\n", t.Threshold, state)
		}
		if s.Signal.Stall() || s.Signal.MemoryHigh() {
			b.WriteString("  (a stall window or a container's memory.high: one capture cannot rank for it)\n")
			continue
		}
		switch {
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
		if len(s.Pods) == 0 {
			continue
		}
		b.WriteString("  pods, in eviction order:\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "    RANK\tPOD\tWHY")
		for _, p := range s.Pods {
			pos := "-"
			if p.Eligible {
				pos = fmt.Sprint(p.Rank)
			}
			fmt.Fprintf(tw, "    %s\t%s/%s\t%s\n", pos, p.Namespace, p.Name, p.Why)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
