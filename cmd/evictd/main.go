// SPDX-License-Identifier: Apache-2.0

// Command evictd is a node-level eviction agent for Kubernetes.
//
// main only parses the subcommand and hands over to the packages below pkg/;
// each subcommand lives in its own file of this package.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/buildinfo"
)

// Exit codes are part of the CLI contract (README, "Exit codes").
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usage gives every command's usage line: each names all its flags but run's,
// whose help lists them in sections; docs/flags.md has them all.
const usage = `evictd: a node-level eviction agent for Kubernetes

Usage:
  ` + observeSynopsis + `
  ` + rankSynopsis + `
  ` + explainSynopsis + `
  ` + traceSynopsis + `
  ` + replaySynopsis + `
  ` + runSynopsis + `
  ` + cleanupSynopsis + `
  ` + versionSynopsis + `

Run "evictd COMMAND --help" for the flags of a command; docs/flags.md lists
every command's.
`

// Flags every command has.
const (
	flagHelp    = "help"
	flagVersion = "version"
)

// Set at build time with -ldflags "-X main.version=... -X main.revision=..."
// (the Makefile: the VERSION file, the commit, its date, and "true" for a tree
// with uncommitted changes); buildinfo falls back to what the toolchain
// recorded.
var version, revision, buildDate, modified = "dev", "", "", ""

// build is what this binary was built from.
func build() buildinfo.Info {
	return buildinfo.Read(buildinfo.Stamped{Version: version, Revision: revision, Date: buildDate, Modified: modified})
}

func main() {
	publishVersion(build())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "--version":
		name = "version"
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "evictd: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// flagError reports a flag the command line got wrong on one line, with a
// pointer to the help, and returns the usage exit code. pflag's own text
// already names the flag and the value ("unknown flag: --evction-hard",
// "invalid argument \"x\" for \"--eviction-burst\" flag: ...").
func flagError(stderr io.Writer, command string, err error) int {
	if errors.Is(err, pflag.ErrHelp) {
		// Only when a command defines no --help of its own; every one does.
		err = errors.New("--help is not available here")
	}
	msg := strconvNoise.ReplaceAllStringFunc(oneLine(err), func(m string) string {
		parts := strconvNoise.FindStringSubmatch(m)
		if parts[2] == "value out of range" {
			return "out of range"
		}
		return numberWords[parts[1]]
	})
	fmt.Fprintf(stderr, "evictd %s: %s (see \"evictd %s --help\")\n", command, msg, command)
	return exitUsage
}

// strconvNoise matches the Go parse errors pflag passes on after its own
// `invalid argument "x" for "--flag" flag:`, which names the value already.
var strconvNoise = regexp.MustCompile(`strconv\.Parse(Int|Uint|Float|Bool): parsing "[^"]*": (invalid syntax|value out of range)`)

// numberWords says in words what a strconv parser wanted.
var numberWords = map[string]string{
	"Int":   "not a whole number",
	"Uint":  "not a whole number of 0 or more",
	"Float": "not a number",
	"Bool":  "not true or false",
}
