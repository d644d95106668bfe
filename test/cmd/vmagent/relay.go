// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"time"
)

// relayDialTimeout bounds the dial to a relay's target. The guest is slow,
// and a guestfwd target first starts a process on the host.
const relayDialTimeout = 30 * time.Second

// relay forwards every TCP connection accepted on listen to target.
type relay struct {
	listen, target string
}

func (r relay) String() string { return r.listen + "=" + r.target }

// parseRelay reads LISTEN=TARGET, both host:port (LISTEN's host may be empty).
func parseRelay(s string) (relay, error) {
	listen, target, ok := strings.Cut(s, "=")
	if !ok {
		return relay{}, fmt.Errorf("relay %q is not LISTEN=TARGET", s)
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return relay{}, fmt.Errorf("relay %q: listen address: %v", s, err)
	}
	if host, _, err := net.SplitHostPort(target); err != nil || host == "" {
		return relay{}, fmt.Errorf("relay %q: target %q is not host:port", s, target)
	}
	return relay{listen: listen, target: target}, nil
}

// serve accepts on ln until it is closed, relaying each connection.
func (r relay) serve(ln net.Listener, logger *log.Logger) {
	for {
		conn, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, most likely: wait for some to free up.
			logger.Printf("relay %s: accept: %v", ln.Addr(), err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go r.handle(conn.(*net.TCPConn), logger)
	}
}

func (r relay) handle(in *net.TCPConn, logger *log.Logger) {
	out, err := net.DialTimeout("tcp", r.target, relayDialTimeout)
	if err != nil {
		logger.Printf("relay %s -> %s: dial failed: %v", in.LocalAddr(), r.target, err)
		in.Close()
		return
	}
	// Errors here are the peers' business (a reset, a client that went away).
	_ = proxy(in, out.(*net.TCPConn))
}

// stream is one end of a proxied byte stream that can be half-closed.
type stream interface {
	io.Reader
	io.Writer
	// CloseWrite tells the peer that no more data comes (a TCP FIN) while
	// data may still arrive, which TLS and HTTP/2 shutdowns rely on.
	CloseWrite() error
	Close() error
}

// proxy copies a to b and b to a. A direction that ends cleanly half-closes
// its destination and the other goes on; when both have ended, both are
// closed. An error in either direction closes both at once and is returned
// without waiting for the other direction, whose copy the close ends (or, for
// a reader that a close cannot interrupt, the process's exit).
func proxy(a, b stream) error {
	errc := make(chan error, 2) // buffered: the goroutine left behind must not block
	go func() { errc <- pump(b, a) }()
	go func() { errc <- pump(a, b) }()
	for range 2 {
		if err := <-errc; err != nil {
			a.Close()
			b.Close()
			return err
		}
	}
	a.Close()
	b.Close()
	return nil
}

// pump copies src to dst until src's end, then half-closes dst.
func pump(dst, src stream) error {
	if _, err := io.Copy(dst, src); err != nil {
		return err
	}
	return dst.CloseWrite()
}
