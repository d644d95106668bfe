// SPDX-License-Identifier: Apache-2.0

// Command workload is the process the kubelet stand-in (test/nodesim) runs for
// every container of a simulated pod. It makes real, measurable pressure:
//
//	workload [--hold-mib N] [--grow-mib-per-sec R --grow-to-mib C]
//	         [--burst-mib B --bursts K [--burst-delay D] [--burst-interval I]]
//	         [--write-mib N [--write-dir DIR] [--write-mib-per-sec W]]
//	         [--reread-mib N [--reread-dir DIR]]
//	         [--churn-mib C [--churn-pause P]]
//	         [--procs N] [--term-delay D | --ignore-term] [--exit-after D]
//
// Memory is anonymous memory whose every page is written, so it is charged to
// the memory cgroup the process runs in (reading alone would map the shared
// zero page and charge nothing). Growth is steady (a leak, in 100 ms steps);
// bursts each touch B MiB as fast as the kernel faults pages in, I apart
// (the first D after the hold), and then everything is held. Written files land in the pod's emptyDir
// (WORKLOAD_DIR, set by the stand-in), so they count as the pod's ephemeral
// storage. A reread file (--reread-mib) is written once, past the page
// cache, and then read back from start to end forever: under a memory limit
// below its size the pod's cgroup keeps reclaiming its own page cache and
// reading it again, a memory stall (PSI) with node memory still available;
// its directory must be on a disk, not a tmpfs. A churn (--churn-mib) is
// a garbage-collected heap's life: above the hold, a chunk of C MiB is
// mapped, every page written and the chunk unmapped, over and over (P
// apart), so a container whose memory.high lies between the hold and the
// hold plus C crosses it on every cycle and falls back below it after. Extra processes are
// children in the same process group, so a
// signal to the group reaches them and they count in the pod's pids cgroup.
//
// As `workload --exec-as NAME ARGS...` it replaces itself with a copy of
// itself whose argv is NAME ARGS... (bash's `exec -a NAME`), which only
// waits for a signal: a process that calls itself, say, the kubelet, with
// the kubelet's flags on its command line, as a pod's author can start one.
//
// On SIGTERM it waits --term-delay and exits 0; a long delay makes the caller
// fall back to SIGKILL, which is how tests check that grace periods end.
// With --ignore-term it says so and goes on (growing, churning, holding)
// until SIGKILL, as a container's PID 1 without a handler does; while it
// touches pages after that it reports, every second, what it holds and what
// it asks for.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == "--exec-as" {
		// The exec'd copy sees its own name, not ours: it knows itself
		// by the variable.
		env := append(os.Environ(), posingEnv+"=1")
		err := syscall.Exec("/proc/self/exe", os.Args[2:], env)
		fmt.Fprintf(os.Stderr, "workload: exec as %s: %v\n", os.Args[2], err)
		os.Exit(1)
	}
	if os.Getenv(posingEnv) == "1" {
		os.Exit(runChild(termSignals()))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// posingEnv marks the copy --exec-as started: it ignores its arguments.
const posingEnv = "WORKLOAD_POSING"

func termSignals() <-chan os.Signal {
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	return terms
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == handleAttackCommand {
		return runHandleAttack(args[1:], stdout, stderr)
	}
	// Catch SIGTERM before anything else, so that --term-delay holds even for
	// a signal that arrives while the process is still starting.
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	defer signal.Stop(terms)
	cfg, err := parseFlags(args, os.Getenv)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "workload: %v\n", err)
		return 2
	}
	if cfg.child {
		return runChild(terms)
	}
	// SIGTERM is handled by run itself (term delay); SIGINT ends at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT)
	defer stop()
	if err := newWorkload(cfg, stdout).run(ctx, terms); err != nil {
		fmt.Fprintf(stderr, "workload: %v\n", err)
		return 1
	}
	return 0
}

// runChild is what each --procs child runs: it only has to exist until its
// group is signalled. The parent-death signal set by the parent makes sure a
// SIGKILLed parent takes its children along.
func runChild(terms <-chan os.Signal) int {
	ints := make(chan os.Signal, 1)
	signal.Notify(ints, syscall.SIGINT)
	select {
	case <-terms:
	case <-ints:
	}
	return 0
}
