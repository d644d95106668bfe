// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// EgressProxy is the API server's way to the nodes' kubelets (its egress
// selector's "cluster" connection, an HTTP CONNECT proxy on a Unix socket), as
// konnectivity is in clusters whose control plane cannot reach the node
// network. A real node in a QEMU guest has addresses only inside QEMU's
// user-mode network; its harness forwards the kubelet's port to a loopback
// port and routes the Node's addresses there, so that what goes through the
// kubelet (kubectl port-forward, logs, exec) works as in a real cluster.
// A target with no route is refused, unless Beyond names a way into the
// guest for it: nothing on the host is dialled beyond loopback.
//
// The API server reaches the proxy on a Unix socket: kube-apiserver 1.37.2
// accepts an http:// TCP proxy URL without TLS in its validation, then
// dereferences the missing TLS configuration at start and panics
// (egressselector.getTLSConfig).
type EgressProxy struct {
	ln  net.Listener
	log *zap.Logger

	mu     sync.Mutex
	routes map[string]string // "host:port" the API server asks for -> loopback "127.0.0.1:port"
	// beyond dials a target with no route (a pod IP inside a guest), nil
	// for none.
	beyond func(target string) (net.Conn, error)
}

// startEgressProxy listens on the Unix socket at path.
func startEgressProxy(path string, log *zap.Logger) (*EgressProxy, error) {
	// sun_path is 108 bytes with its NUL.
	if len(path) > 107 {
		return nil, fmt.Errorf("egress proxy socket path %s is over 107 bytes", path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	p := &EgressProxy{ln: ln, log: log, routes: map[string]string{}}
	go p.serve()
	return p, nil
}

// Route sends the API server's connections to target ("host:port", as the
// Node names it) to the loopback address to; a to off 127.0.0.0/8 is
// refused when asked for, never dialled.
func (p *EgressProxy) Route(target, to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[target] = to
}

// Beyond dials the targets no Route names with dial: a node harness's
// tunnel into its guest's network, where the pod IPs the API server's pod
// proxy asks for live.
func (p *EgressProxy) Beyond(dial func(target string) (net.Conn, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.beyond = dial
}

// dial connects to target by its route, or through Beyond.
func (p *EgressProxy) dial(target string) (net.Conn, error) {
	p.mu.Lock()
	to, ok := p.routes[target]
	beyond := p.beyond
	p.mu.Unlock()
	switch {
	case ok:
		// The host dials loopback only; a guest's own addresses are
		// reached through its forwards or its agent (Beyond).
		host, _, err := net.SplitHostPort(to)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("route to %s: not a loopback address", to)
		}
		return net.DialTimeout("tcp", to, 10*time.Second)
	case beyond != nil:
		return beyond(target)
	}
	return nil, errNoRoute
}

var errNoRoute = errors.New("no route")

// writeConfig writes the API server's EgressSelectorConfiguration for
// this proxy into dir and returns its path.
func (p *EgressProxy) writeConfig(dir string) (string, error) {
	path := filepath.Join(dir, "egress-selector.yaml")
	cfg := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, p.ln.Addr())
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

func (p *EgressProxy) close() { _ = p.ln.Close() }

func (p *EgressProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.tunnel(c)
	}
}

// tunnel answers one CONNECT and splices the two connections until both
// directions have ended (a half-close passed on as one).
func (p *EgressProxy) tunnel(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		fmt.Fprintf(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	up, err := p.dial(req.Host)
	if err != nil {
		p.log.Warn("egress: refused", zap.String("target", req.Host), zap.Error(err))
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n%s: %v\n", req.Host, err)
		return
	}
	defer up.Close()
	_ = c.SetReadDeadline(time.Time{})
	// The API server speaks first only after the 200 (TLS), so br holds
	// nothing more; copy from it all the same.
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if hc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
	}
}

// DialConnect opens a tunnel to target (HOST:PORT) through the HTTP CONNECT
// proxy at addr on network ("tcp", "unix"), as the API server's egress
// dialer does; a refusal is an error naming the proxy's status.
func DialConnect(network, addr, target string) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(40 * time.Second))
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s through %s: %w", target, addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		c.Close()
		return nil, fmt.Errorf("CONNECT %s through %s: %s: %s", target, addr, resp.Status, strings.TrimSpace(string(body)))
	}
	_ = c.SetDeadline(time.Time{})
	return &tunnelConn{Conn: c, r: br}, nil
}

// tunnelConn reads through the reader that took the CONNECT's answer, in
// case it holds the tunnel's first bytes, and can be half-closed.
type tunnelConn struct {
	net.Conn
	r *bufio.Reader
}

func (t *tunnelConn) Read(p []byte) (int, error) { return t.r.Read(p) }

func (t *tunnelConn) CloseWrite() error {
	if hc, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return nil
}
