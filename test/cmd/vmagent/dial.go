// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

const dialTimeout = 10 * time.Second

// runDial joins stdin and stdout to a TCP connection to args[0].
//
// QEMU's guestfwd runs it with one socket of a socketpair as stdin, stdout
// AND stderr, so anything it prints lands in the guest's connection: it stays
// silent unless it fails, and then the guest's client sees the message.
func runDial(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "vmagent dial: want exactly one ADDR; "+usage)
		return exitUsage
	}
	addr := args[0]
	// Under QEMU stderr is the proxied socket: once that is shut down, a
	// message must fail with EPIPE instead of killing the process by SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	if err := checkLoopback(addr); err != nil {
		fmt.Fprintf(stderr, "vmagent dial: %v\n", err)
		return exitUsage
	}
	if err := dial(addr, stdio()); err != nil {
		fmt.Fprintf(stderr, "vmagent dial: %v\n", err)
		return exitFail
	}
	return exitOK
}

// checkLoopback refuses any address but an IPv4 literal in 127.0.0.0/8 with a
// port: the host side of the tests may only ever dial loopback. Names
// (localhost included) are refused rather than resolved, since a resolver
// may answer with something else.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v", addr, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("address %q: port %q is not 1-65535", addr, port)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().Is4() || !netip.MustParsePrefix("127.0.0.0/8").Contains(ip.Unmap()) {
		return fmt.Errorf("refusing to dial %q: only 127.0.0.0/8 addresses (IP literals) are allowed", addr)
	}
	return nil
}

// dial connects to addr and proxies local to it until both directions end.
func dial(addr string, local stream) error {
	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		// local stays open: under QEMU the caller's message goes through it.
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	if err := proxy(local, conn.(*net.TCPConn)); err != nil {
		return fmt.Errorf("relay to %s: %w", addr, err)
	}
	return nil
}

// stdio is the process's stdin and stdout as one stream. When they are
// sockets (QEMU's case), they are used as network connections, so that
// CloseWrite is a real shutdown the guest sees as FIN and a broken
// connection is an error rather than a SIGPIPE.
func stdio() stream {
	var in io.Reader = os.Stdin
	var out io.Writer = os.Stdout
	if c, err := net.FileConn(os.Stdin); err == nil {
		in = c
	}
	if c, err := net.FileConn(os.Stdout); err == nil {
		out = c
	}
	return readWriteStream{in, out}
}

// readWriteStream joins a reader and a writer into a stream. CloseWrite
// half-closes the writer when it can, and closes it otherwise (a pipe).
type readWriteStream struct {
	io.Reader
	io.Writer
}

func (s readWriteStream) CloseWrite() error {
	switch w := s.Writer.(type) {
	case interface{ CloseWrite() error }:
		return w.CloseWrite()
	case io.Closer:
		return w.Close()
	}
	return nil
}

func (s readWriteStream) Close() error {
	var err error
	if c, ok := s.Writer.(io.Closer); ok {
		err = c.Close()
	}
	if c, ok := s.Reader.(io.Closer); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
