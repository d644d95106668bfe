// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/trace"
)

// traceSynopsis names every flag of trace but --help.
const traceSynopsis = "evictd trace --node NODE -o FILE [--address HOST:PORT] [--kubeconfig FILE] [--namespace NS] [--selector SELECTOR] " +
	"[--certificate-authority FILE] [--token-file FILE] [--insecure-skip-tls-verify] [--request-timeout DURATION]"

const traceUsage = `Usage: ` + traceSynopsis + `

Saves the trace of the running agent on NODE: what each of its recent
passes observed (the node's figures, the pod list, the wake-up) and the
eviction calls it made with their answers, as gzipped JSON lines, for
evictd replay. It holds each pod as far as the decisions read it: no env,
args, commands, labels, or annotations but the three evictd reads. The
agent keeps --trace-size bytes of it (4 MiB by default). It is asked on
its secure port as evictd explain --node asks it; you need get on
nodes/trace in the API group evictd.io (the ClusterRole
evictd-explain-reader).

Flags:
`

// maxTrace bounds a downloaded trace: the largest --trace-size, and some.
const maxTrace = trace.MaxBudget + 1<<20

type traceFlags struct {
	live liveFlags
	out  string
	help bool
}

func newTraceFlags() (*traceFlags, *pflag.FlagSet) {
	f := &traceFlags{}
	fs := cliflag.NewFlagSet("trace")
	f.live.bind(fs, "Save the trace of the running agent on this node (its secure port, as the caller: needs get on nodes/trace in the API group evictd.io).")
	fs.StringVarP(&f.out, "output", "o", "", "File to write the trace to (gzipped JSON lines); - for standard output.")
	fs.BoolVarP(&f.help, flagHelp, "h", false, "Print this help and exit.")
	return f, fs
}

func traceCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, fs := newTraceFlags()
	if err := fs.Parse(args); err != nil {
		return flagError(stderr, "trace", err)
	}
	live, out := f.live, f.out
	if f.help {
		fmt.Fprint(stdout, traceUsage)
		fmt.Fprint(stdout, fs.FlagUsagesWrapped(helpColumns))
		return exitOK
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "evictd trace: %v\n", err)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	case live.node == "" && live.address == "":
		return fail(fmt.Errorf("give --node NODE (or --address HOST:PORT)"))
	case out == "":
		return fail(fmt.Errorf("give -o FILE (or -o - for standard output)"))
	case live.timeout <= 0:
		return fail(fmt.Errorf("invalid --request-timeout %v: want a positive duration", live.timeout))
	}
	body, addr, err := agentGet(ctx, live, "/trace", maxTrace)
	if err != nil {
		fmt.Fprintf(stderr, "evictd trace: %v\n", err)
		return exitFailure
	}
	tr, err := trace.Read(bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "evictd trace: agent at %s: %v\n", addr, err)
		return exitFailure
	}
	if live.node != "" && tr.Header.Node != live.node {
		fmt.Fprintf(stderr, "evictd trace: agent at %s traces node %q, not %q\n", addr, tr.Header.Node, live.node)
		return exitFailure
	}
	if out == "-" {
		_, err = stdout.Write(body)
	} else {
		err = os.WriteFile(out, body, 0o600)
	}
	if err != nil {
		fmt.Fprintf(stderr, "evictd trace: %v\n", err)
		return exitFailure
	}
	if out != "-" {
		fmt.Fprintf(stdout, "%s: %s\n", out, describeTrace(tr))
	}
	return exitOK
}

// describeTrace says what a trace covers, in one line.
func describeTrace(tr *trace.Trace) string {
	s := fmt.Sprintf("node %s, %d passes", tr.Header.Node, len(tr.Passes))
	if n := len(tr.Passes); n > 0 {
		s += fmt.Sprintf(" from %s to %s", tr.Passes[0].At.UTC().Format(timeLayout), tr.Passes[n-1].At.UTC().Format(timeLayout))
	}
	if tr.Header.Dropped > 0 {
		s += fmt.Sprintf(" (%d older passes dropped for the size bound: the trace begins mid-run)", tr.Header.Dropped)
	}
	return s
}

// timeLayout is the times of trace and replay: to the millisecond.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"
