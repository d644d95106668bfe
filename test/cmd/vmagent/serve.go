// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"
)

// relayFlags collects the repeated --relay=LISTEN=TARGET.
type relayFlags []relay

func (r *relayFlags) String() string {
	parts := make([]string, len(*r))
	for i, rl := range *r {
		parts[i] = rl.String()
	}
	return strings.Join(parts, ",")
}

func (r *relayFlags) Set(s string) error {
	rl, err := parseRelay(s)
	if err != nil {
		return err
	}
	*r = append(*r, rl)
	return nil
}

// runServe listens on the API address and every relay, says so on stdout and
// serves until the process is killed; it returns only on failure.
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported below, on one line
	listen := fs.String("listen", "", "address of the HTTP API, e.g. :7000")
	var relays relayFlags
	fs.Var(&relays, "relay", "LISTEN=TARGET: relay TCP connections to LISTEN to TARGET (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "vmagent serve: %v; %s\n", err, usage)
		return exitUsage
	}
	if *listen == "" {
		fmt.Fprintln(stderr, "vmagent serve: --listen is required; "+usage)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vmagent serve: unexpected argument %q; %s\n", fs.Arg(0), usage)
		return exitUsage
	}

	logger := log.New(stderr, "vmagent: ", log.Ltime|log.Lmicroseconds)

	// Listen on everything before serving anything, so that the "listening"
	// line means the whole agent is ready and a busy address fails the start.
	apiLn, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "vmagent serve: API listen on %s: %v\n", *listen, err)
		return exitFail
	}
	relayLns := make([]net.Listener, 0, len(relays))
	for _, rl := range relays {
		ln, err := net.Listen("tcp", rl.listen)
		if err != nil {
			fmt.Fprintf(stderr, "vmagent serve: relay listen on %s: %v\n", rl.listen, err)
			apiLn.Close()
			for _, ln := range relayLns {
				ln.Close()
			}
			return exitFail
		}
		relayLns = append(relayLns, ln)
	}
	for i, rl := range relays {
		logger.Printf("relay %s -> %s started", relayLns[i].Addr(), rl.target)
		go rl.serve(relayLns[i], logger)
	}
	fmt.Fprintf(stdout, "listening on %s\n", apiLn.Addr())

	srv := &http.Server{
		Handler: withConnect(newHandler(logger), logger),
		// No read or write timeout: an exec may legitimately last minutes.
		ReadHeaderTimeout: time.Minute,
		ErrorLog:          logger,
	}
	err = srv.Serve(apiLn)
	fmt.Fprintf(stderr, "vmagent serve: API on %s: %v\n", apiLn.Addr(), err)
	return exitFail
}
