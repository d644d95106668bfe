// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// connectTo asks the agent at addr to CONNECT target and returns the
// connection, its reader and the agent's status.
func connectTo(t *testing.T, addr, target string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp.StatusCode
}

// TestConnectTunnels: CONNECT reaches a listener from the agent's side and
// carries bytes both ways, half-close included; a target that refuses is
// 502; the rest of the API is unchanged.
func TestConnectTunnels(t *testing.T) {
	srv := httptest.NewServer(withConnect(newHandler(log.New(io.Discard, "", 0)), log.New(io.Discard, "", 0)))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			// Echoes until the client's half-close, then closes.
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()

	c, br, code := connectTo(t, addr, echo.Addr().String())
	if code != http.StatusOK {
		t.Fatalf("CONNECT %s: %d, want 200", echo.Addr(), code)
	}
	if _, err := io.WriteString(c, "over the tunnel\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(br); err != nil || string(got) != "over the tunnel\n" {
		t.Errorf("through the tunnel: %q, %v", got, err)
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := closed.Addr().String()
	closed.Close()
	if _, _, code := connectTo(t, addr, gone); code != http.StatusBadGateway {
		t.Errorf("CONNECT to a closed port: %d, want 502", code)
	}
	if _, _, code := connectTo(t, addr, "no-port"); code != http.StatusBadRequest {
		t.Errorf("CONNECT without a port: %d, want 400", code)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz beside CONNECT: %v, %v", resp, err)
	}
}
