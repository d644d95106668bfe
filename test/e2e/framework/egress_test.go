// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// connect tunnels to target through p.
func connect(t *testing.T, p *EgressProxy, target string) (net.Conn, error) {
	t.Helper()
	c, err := DialConnect("unix", p.ln.Addr().String(), target)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestEgressProxyRoutes: a routed target is spliced to its loopback
// address both ways; any other is refused, and nothing is dialled for it.
func TestEgressProxyRoutes(t *testing.T) {
	p, err := startEgressProxy(filepath.Join(t.TempDir(), "egress.sock"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	kubelet, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	go func() {
		for {
			c, err := kubelet.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p.Route("evictd-vm:10250", kubelet.Addr().String())
	p.Route("10.0.2.15:10250", kubelet.Addr().String())

	for _, target := range []string{"evictd-vm:10250", "10.0.2.15:10250"} {
		c, err := connect(t, p, target)
		if err != nil {
			t.Fatalf("CONNECT %s: %v", target, err)
		}
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "ping\n" {
			t.Errorf("CONNECT %s: echoed %q, %v", target, line, err)
		}
	}
	// A route off loopback is refused before any dial: the host dials
	// 127.0.0.0/8 only.
	p.Route("evictd-vm:10255", "192.0.2.1:10255")
	if _, err := connect(t, p, "evictd-vm:10255"); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("CONNECT through a route to 192.0.2.1: %v, want a refusal naming loopback", err)
	}
	// The listener's own address would answer a direct dial: refused all
	// the same, since it has no route.
	for _, target := range []string{kubelet.Addr().String(), "10.0.2.15:10255", "evictd-vm:22"} {
		if _, err := connect(t, p, target); err == nil || !strings.Contains(err.Error(), "502 Bad Gateway") {
			t.Errorf("CONNECT %s with no route: %v, want 502", target, err)
		}
	}
	// Not a CONNECT: refused.
	c, err := net.Dial("unix", p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET http://evictd-vm:10250/ HTTP/1.1\r\nHost: evictd-vm\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET through the proxy: %v, %v; want 405", resp, err)
	}
	if cfg, err := p.writeConfig(t.TempDir()); err != nil {
		t.Fatal(err)
	} else if b, err := os.ReadFile(cfg); err != nil || !strings.Contains(string(b), "udsName: "+p.ln.Addr().String()) ||
		!strings.Contains(string(b), "name: cluster") {
		t.Errorf("egress selector configuration (%v):\n%s", err, b)
	}
}

// TestEgressProxyBeyond: a target with no route goes to Beyond's dial (a
// guest's tunnel), a routed one never does.
func TestEgressProxyBeyond(t *testing.T) {
	p, err := startEgressProxy(filepath.Join(t.TempDir(), "egress.sock"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var asked []string
	p.Route("evictd-vm:10250", "127.0.0.1:1")
	p.Beyond(func(target string) (net.Conn, error) {
		asked = append(asked, target)
		a, b := net.Pipe()
		go func() { defer b.Close(); _, _ = io.Copy(b, b) }()
		return a, nil
	})
	c, err := connect(t, p, "10.88.0.7:9731")
	if err != nil {
		t.Fatalf("CONNECT to a pod IP through Beyond: %v", err)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "ping\n" {
		t.Errorf("through Beyond: %q, %v", line, err)
	}
	// Routed, to a port nothing listens on: refused, not handed to Beyond.
	if _, err := connect(t, p, "evictd-vm:10250"); err == nil || !strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Errorf("CONNECT to a dead route: %v, want 502", err)
	}
	if len(asked) != 1 || asked[0] != "10.88.0.7:9731" {
		t.Errorf("Beyond asked for %q, want only the pod IP", asked)
	}
}
