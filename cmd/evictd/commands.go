// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/pkg/cliflag"
)

// command is one subcommand. dispatch runs it by name; its flags are the
// sets its --help prints, which docs/flags.md is generated from (a test
// fails when the two differ), so a command added here is documented there.
type command struct {
	name, synopsis string
	run            func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// flags returns the command's flags by help section; nil for a command
	// without flags.
	flags func() []flagSection
}

// flagSection is one list of flags in a command's help: run's sections
// ("Generic flags", ...), or the one "Flags:" list of the others (title "").
type flagSection struct {
	title string
	fs    *pflag.FlagSet
}

// commands is every subcommand, in the order the usage lists them.
//
// run and observe read the host with the container's capabilities, so
// both enter the sandbox (cmd/evictd/app/sandbox) before their first host
// read. The others do not: rank, trace and replay read only the files
// they are named, explain and cleanup only talk to the API server, and
// version reads nothing; none of them opens a path the capabilities
// would widen, so refusing file handles would take nothing from them.
var commands = []command{
	{"observe", observeSynopsis, observeCmd, oneSection(newObserveFlags)},
	{"rank", rankSynopsis, rankCmd, oneSection(newRankFlags)},
	{"explain", explainSynopsis, explainCmd, oneSection(newExplainFlags)},
	{"trace", traceSynopsis, traceCmd, oneSection(newTraceFlags)},
	{"replay", replaySynopsis, replayCmd, oneSection(newReplayFlags)},
	{"run", runSynopsis, runCmd, runSections},
	{"cleanup", cleanupSynopsis, cleanupCmd, oneSection(newCleanupFlags)},
	{"version", versionSynopsis, versionCmd, nil},
}

// oneSection is the flags of a command whose help lists them under "Flags:".
func oneSection[T any](newFlags func() (T, *pflag.FlagSet)) func() []flagSection {
	return func() []flagSection {
		_, fs := newFlags()
		return []flagSection{{fs: fs}}
	}
}

// runSections is run's flags, by the sections of `evictd run --help`.
func runSections() []flagSection {
	s := newRunFlags().sections
	var out []flagSection
	for _, name := range s.Names() {
		out = append(out, flagSection{title: cliflag.Title(name) + " flags", fs: s.Section(name)})
	}
	return out
}

const versionSynopsis = "evictd version | --version"

// versionCmd prints what this binary was built from; it takes no flags.
func versionCmd(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprint(stdout, build())
	return exitOK
}
