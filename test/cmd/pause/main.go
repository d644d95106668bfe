// SPDX-License-Identifier: Apache-2.0

// Command pause is the pod sandbox's process in the pause image the VM tests
// build themselves (the guest cannot pull one). It is PID 1 of the sandbox:
// it holds the pod's namespaces open by existing, so it only waits, for
// SIGINT or SIGTERM, and then exits 0.
//
// When the pod shares one PID namespace, orphaned processes of every
// container are re-parented to it, so it reaps them; without that they would
// stay zombies, holding pids the pod's pids limit counts.
//
// It ignores its arguments, except -v, which prints its version and exits.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const version = "pause (evictd test image) 1.0"

func main() {
	for _, arg := range os.Args[1:] {
		if arg == "-v" {
			fmt.Println(version)
			return
		}
	}

	// As PID 1, a signal without a handler is dropped by the kernel, so
	// SIGTERM works only because it is caught here.
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Children that ended before Notify sent their SIGCHLD to nobody.
	reapZombies()
	fmt.Fprintln(os.Stderr, "pause: waiting for SIGINT or SIGTERM")

	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reapZombies()
			continue
		}
		return
	}
}

// reapZombies waits for every child that has ended, without blocking, and
// returns their pids. One SIGCHLD may stand for many children, so it loops
// until none is left.
func reapZombies() []int {
	var reaped []int
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return reaped
		}
		reaped = append(reaped, pid)
	}
}
