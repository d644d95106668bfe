// SPDX-License-Identifier: Apache-2.0

// Command vmagent is the bridge between tests on the host and the QEMU guest
// that test/vmnode boots with user-mode networking, where the host may only
// dial loopback and the guest has no shell we could log in to:
//
//	vmagent serve --listen=ADDR [--relay=LISTEN=TARGET]...
//	vmagent dial ADDR
//	vmagent crossing --below=BYTES [--interval=1ms] [--timeout=1m] [COMMAND...]
//
// serve runs in the guest. It answers an HTTP API on ADDR (reached from the
// host through QEMU's hostfwd) that runs commands, starts and signals
// daemons, and it relays TCP connections from LISTEN to TARGET, so that
// guest programs can reach a fixed address (say the API server's service IP)
// that ends up on a guestfwd port:
//
//	GET  /healthz  200 "ok"
//	POST /exec     {"argv": [...], "stdin": "...", "timeoutSeconds": 30, "env": ["K=V"]}
//	               200 {"exitCode": N, "stdout": "...", "stderr": "...", "seconds": S, "error": "..."}
//	POST /spawn    {"argv": [...], "log": "/path", "env": ["K=V"]}  200 {"pid": N}
//	POST /signal   {"pid": N, "signal": "TERM"|"KILL"|"INT"|"HUP"}  200 {"pid": N, "signal": "TERM"}
//	CONNECT HOST:PORT  200, then the connection is a tunnel to HOST:PORT dialled from the
//	               guest (the API server's way to pod IPs); 502 when that dial fails
//
// A request it cannot read is answered 400 with one line of text naming the
// problem (unknown fields included); a daemon that cannot start 500; a
// signal to a process that does not exist, or to a daemon that has ended,
// 404. An exec always answers 200: a command that cannot start or times out
// has exitCode -1 and an error, and a command killed by signal N 128+N.
//
// Its first line on stdout is "listening on ADDR" once the API and every
// relay listen.
//
// dial runs on the host as the COMMAND of QEMU's
// guestfwd=tcp:IP:PORT-cmd:COMMAND: QEMU starts it for each guest connection
// with that connection on stdin and stdout, and dial joins it to ADDR, which
// must be on 127.0.0.0/8.
//
// crossing runs in the guest, through /exec: it reads the node's
// memory.available as the kubelet computes it on cgroup v2 every interval,
// starts COMMAND after the first read, and prints as JSON when the value was
// last seen at or above BYTES and first seen below it (guest clock), for
// latency benchmarks that set an agent's log against it.
//
// All exit 2 on bad usage. The guest has no libc: build with CGO_ENABLED=0.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = "usage: vmagent serve --listen=ADDR [--relay=LISTEN=TARGET]... | vmagent dial ADDR | vmagent crossing --below=BYTES [--interval=D] [--timeout=D] [COMMAND...]"

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process's exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "vmagent: missing subcommand; "+usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "dial":
		return runDial(args[1:], stderr)
	case "crossing":
		return runCrossing(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "vmagent: unknown subcommand %q; %s\n", args[0], usage)
		return exitUsage
	}
}
