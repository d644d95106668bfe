// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/evictd/evictd/cmd/evictd/app"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/options"
)

const runSynopsis = "evictd run --node-name NODE [flags]"

const runUsage = `Usage: ` + runSynopsis + `

The agent: watches this node's pods, observes memory, disk and PID pressure,
and evicts pods through the Eviction API when a threshold is met.
See docs/run.md for how to run and configure it, and docs/flags.md for
every flag.
`

// helpColumns is the width help text is wrapped at: 0, one line per flag,
// as kube components print theirs off a terminal; pflag's wrapping breaks
// only at spaces and puts threshold examples in columns of their own.
const helpColumns = 0

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
	// Never restored: client-go's goroutines outlive app.Run (a list in
	// flight when it returns fails with the cancelled context a moment
	// later), and their lines must go through this logger, which drops
	// cancelled contexts, not to klog's raw stderr as a second error line.
	_ = logging.RouteKlog(log)

	if err := app.Run(ctx, opts, log, build()); err != nil {
		if errors.Is(err, options.ErrUsage) {
			fmt.Fprintf(stderr, "evictd run: %s\n", usageMessage(err))
			return exitUsage
		}
		log.Error("evictd failed", logging.Err(err))
		return exitFailure
	}
	return exitOK
}

// runFlags is every flag of `evictd run`, by help section.
type runFlags struct {
	sections              *cliflag.Sections
	opts                  *options.Options
	logFormat, logLevel   string
	showVersion, showHelp bool
}

func newRunFlags() *runFlags {
	f := &runFlags{sections: &cliflag.Sections{}, opts: options.NewOptions()}
	f.opts.AddFlags(f.sections)
	logging.AddFlags(f.sections.Section(options.SectionLogging), &f.logFormat, &f.logLevel)
	global := f.sections.Section(options.SectionGlobal)
	global.BoolVar(&f.showVersion, flagVersion, false, "Print the version and exit.")
	global.BoolVarP(&f.showHelp, flagHelp, "h", false, "Print this help and exit.")
	return f
}

// writeHelp prints the usage text and the flags, section by section.
func (f *runFlags) writeHelp(w io.Writer) {
	fmt.Fprint(w, runUsage)
	_ = f.sections.Write(w, helpColumns)
}

// parseRunFlags parses and validates every flag; ok is false when the
// command must exit with code (help, version, or a bad flag reported on
// stderr).
func parseRunFlags(args []string, stdout, stderr io.Writer) (opts *options.Options, logFormat, logLevel string, code int, ok bool) {
	f := newRunFlags()
	fs := f.sections.FlagSet("run")
	if err := fs.Parse(args); err != nil {
		return nil, "", "", flagError(stderr, "run", err), false
	}
	if f.showHelp {
		f.writeHelp(stdout)
		return nil, "", "", exitOK, false
	}
	if f.showVersion {
		fmt.Fprint(stdout, build())
		return nil, "", "", exitOK, false
	}
	logFormat, logLevel, opts = f.logFormat, f.logLevel, f.opts
	opts.Args = slices.Clone(args)
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "evictd run: unexpected argument %q\n", fs.Arg(0))
		return nil, "", "", exitUsage, false
	}
	if _, err := logging.ParseLevel(logLevel); err != nil {
		fmt.Fprintf(stderr, "evictd run: invalid --%s: %s\n", logging.FlagLevel, oneLine(err))
		return nil, "", "", exitUsage, false
	}
	if !slices.Contains(logging.Formats, logFormat) {
		fmt.Fprintf(stderr, "evictd run: invalid --%s %q (want %s)\n", logging.FlagFormat, logFormat, strings.Join(logging.Formats, " or "))
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
	return oneLine(errors.New(strings.TrimPrefix(err.Error(), options.ErrUsage.Error()+": ")))
}

// oneLine joins a multi-line error (errors.Join) into one line.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}
