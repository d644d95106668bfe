package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/logging"
)

const runUsage = `Usage: evictd run --node-name NODE [flags]

The agent: watches this node's pods, observes memory, disk and PID pressure,
and evicts pods through the Eviction API when a threshold is met.
See docs/run.md.

Flags:
`

// Logging flag names.
const (
	flagLogFormat = "log-format"
	flagLogLevel  = "log-level"
)

// runCmd runs "evictd run".
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, logFormat, logLevel, code, ok := parseRunFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	log, err := logging.NewTo(stderr, logFormat, logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "evictd run: %s\n", oneLine(err))
		return exitUsage
	}
	defer func() { _ = log.Sync() }()
	restore := logging.RouteKlog(log)
	defer restore()

	if err := agent.Run(ctx, opts, log, version); err != nil {
		if errors.Is(err, agent.ErrUsage) {
			fmt.Fprintf(stderr, "evictd run: %s\n", usageMessage(err))
			return exitUsage
		}
		log.Error("evictd failed", logging.Err(err))
		return exitFailure
	}
	return exitOK
}

// parseRunFlags parses and validates every flag; ok is false when the
// command must exit with code (help, or a bad flag reported on stderr).
func parseRunFlags(args []string, stdout, stderr io.Writer) (opts *agent.Options, logFormat, logLevel string, code int, ok bool) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line below
	opts = agent.NewOptions()
	opts.AddFlags(fs)
	opts.Config.BindFlags(fs)
	// pkg/config and pkg/evict both define --eviction-max-pod-grace-period;
	// the config's (the kubelet's flag, also settable in the file) is the
	// one registered, and Options.Complete hands its value to the evictor.
	ev := flag.NewFlagSet("evict", flag.ContinueOnError)
	opts.Evict.AddFlags(ev)
	ev.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	fs.StringVar(&logFormat, flagLogFormat, logging.DefaultFormat, "log format: "+strings.Join(logging.Formats, " or "))
	fs.StringVar(&logLevel, flagLogLevel, logging.DefaultLevel, "log level: "+strings.Join(logging.Levels, ", "))

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, runUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil, "", "", exitOK, false
		}
		fmt.Fprintf(stderr, "evictd run: %s\n", oneLine(err))
		return nil, "", "", exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "evictd run: unexpected argument %q\n", fs.Arg(0))
		return nil, "", "", exitUsage, false
	}
	if _, err := logging.ParseLevel(logLevel); err != nil {
		fmt.Fprintf(stderr, "evictd run: invalid --%s: %s\n", flagLogLevel, oneLine(err))
		return nil, "", "", exitUsage, false
	}
	if !contains(logging.Formats, logFormat) {
		fmt.Fprintf(stderr, "evictd run: invalid --%s %q (want %s)\n", flagLogFormat, logFormat, strings.Join(logging.Formats, " or "))
		return nil, "", "", exitUsage, false
	}
	if err := opts.Complete(); err != nil {
		fmt.Fprintf(stderr, "evictd run: %s\n", usageMessage(err))
		return nil, "", "", exitUsage, false
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "evictd run: %s\n", usageMessage(err))
		return nil, "", "", exitUsage, false
	}
	return opts, logFormat, logLevel, exitOK, true
}

// usageMessage drops the ErrUsage prefix and keeps the message on one line.
func usageMessage(err error) string {
	return oneLine(errors.New(strings.TrimPrefix(err.Error(), agent.ErrUsage.Error()+": ")))
}

// oneLine joins a multi-line error (errors.Join) into one line.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
