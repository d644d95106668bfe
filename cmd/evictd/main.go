// Command evictd is a node-level eviction agent for Kubernetes.
//
// main only parses the subcommand and hands over to the packages below pkg/;
// each subcommand lives in its own file of this package.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes are part of the CLI contract (design.md).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `evictd: a node-level eviction agent for Kubernetes

Usage:
  evictd observe [--host-root DIR] [--cgroup-root PATH] [-o json|table]
  evictd rank --summary FILE --pods FILE [--signal SIGNAL] [--config FILE] [-o json|table]
  evictd run [flags]
  evictd version

Run "evictd COMMAND --help" for the flags of a command.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
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
	switch args[0] {
	case "observe":
		return observeCmd(ctx, args[1:], stdout, stderr)
	case "rank":
		return rankCmd(ctx, args[1:], stdout, stderr)
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, version)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "evictd: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}
