// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// listenLoopback listens on a free loopback port, closed with the test.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// startRelay relays a new loopback listener to target and returns its address.
func startRelay(t *testing.T, target string, logger *log.Logger) string {
	t.Helper()
	ln := listenLoopback(t)
	go relay{listen: ln.Addr().String(), target: target}.serve(ln, logger)
	return ln.Addr().String()
}

func TestRelayCopiesBothWaysAndHalfCloses(t *testing.T) {
	// The backend answers only after the request's end (EOF), so the
	// exchange completes only if the relay forwards the client's half-close
	// and then still carries the answer back, and the client's read ends
	// only if the relay forwards the backend's close too.
	backend := listenLoopback(t)
	backendErr := make(chan error, 1)
	go func() {
		c, err := backend.Accept()
		if err != nil {
			backendErr <- err
			return
		}
		defer c.Close()
		req, err := io.ReadAll(c)
		if err != nil {
			backendErr <- err
			return
		}
		_, err = io.WriteString(c, "answer to "+string(req))
		backendErr <- err
	}()
	addr := startRelay(t, backend.Addr().String(), log.New(io.Discard, "", 0))

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "the question"); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read through the relay: %v (got %q)", err, got)
	}
	if string(got) != "answer to the question" {
		t.Fatalf("got %q through the relay, want %q", got, "answer to the question")
	}
	if err := <-backendErr; err != nil {
		t.Fatalf("backend: %v", err)
	}
}

func TestRelayCarriesMuchDataBothWays(t *testing.T) {
	// An echo backend: both directions are busy at once.
	backend := listenLoopback(t)
	go func() {
		c, err := backend.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	}()
	addr := startRelay(t, backend.Addr().String(), log.New(io.Discard, "", 0))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))

	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	writeErr := make(chan error, 1)
	go func() {
		_, err := conn.Write(payload)
		if err == nil {
			err = conn.(*net.TCPConn).CloseWrite()
		}
		writeErr <- err
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes, sent %d (or they differ)", len(got), len(payload))
	}
}

func TestRelayDialFailureClosesTheClientAndIsLogged(t *testing.T) {
	closed := listenLoopback(t)
	target := closed.Addr().String()
	closed.Close()

	var logged syncBuffer
	addr := startRelay(t, target, log.New(&logged, "", 0))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(conn); err != nil || len(got) != 0 {
		t.Fatalf("read = %q, %v; want the relay to close the connection", got, err)
	}
	if line := logged.String(); !strings.Contains(line, "dial failed") || !strings.Contains(line, target) || strings.Count(line, "\n") != 1 {
		t.Fatalf("log %q; want one line about the failed dial to %s", line, target)
	}
}

func TestParseRelay(t *testing.T) {
	got, err := parseRelay("10.0.0.1:443=10.0.2.100:6443")
	if err != nil || got != (relay{listen: "10.0.0.1:443", target: "10.0.2.100:6443"}) {
		t.Fatalf("parseRelay = %+v, %v", got, err)
	}
	if got, err := parseRelay(":8080=10.0.2.100:80"); err != nil || got.listen != ":8080" {
		t.Fatalf("parseRelay with an any-address listen = %+v, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.1:443", "10.0.0.1=10.0.2.100:6443", "10.0.0.1:443=10.0.2.100", "10.0.0.1:443=:6443"} {
		if _, err := parseRelay(bad); err == nil {
			t.Errorf("parseRelay(%q) succeeded, want an error", bad)
		}
	}
}

// syncBuffer is a bytes.Buffer that the relay's goroutines may log to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestProxyClosesBothEndsWhenOneDirectionFails(t *testing.T) {
	broken := &fakeStream{readErr: io.ErrUnexpectedEOF, closed: make(chan struct{})}
	idle := &fakeStream{closed: make(chan struct{})} // reads block until closed
	done := make(chan error, 1)
	go func() { done <- proxy(broken, idle) }()
	select {
	case err := <-done:
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("proxy = %v, want the failing read's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("proxy did not return after a read error")
	}
	for name, s := range map[string]*fakeStream{"failing end": broken, "other end": idle} {
		select {
		case <-s.closed:
		default:
			t.Errorf("%s not closed", name)
		}
	}
}

// fakeStream fails reads with readErr, or blocks them until Close.
type fakeStream struct {
	readErr error
	once    sync.Once
	closed  chan struct{}
}

func (s *fakeStream) Read([]byte) (int, error) {
	if s.readErr != nil {
		return 0, s.readErr
	}
	<-s.closed
	return 0, io.EOF
}
func (s *fakeStream) Write(p []byte) (int, error) { return len(p), nil }
func (s *fakeStream) CloseWrite() error           { return nil }
func (s *fakeStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}
