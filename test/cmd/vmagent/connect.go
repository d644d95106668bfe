// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
)

// withConnect answers CONNECT HOST:PORT (the host's way into the guest's
// network: the API server's egress proxy uses it to reach pod IPs, which
// exist only in the guest) by dialing the target from the guest and
// splicing the two connections; every other request goes to next. The
// guest's own network is restricted to QEMU's forwards, so nothing outside
// the guest and the host's loopback can be reached this way.
func withConnect(next http.Handler, logger *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			next.ServeHTTP(w, r)
			return
		}
		if _, _, err := net.SplitHostPort(r.Host); err != nil {
			badRequest(w, r, fmt.Errorf("CONNECT target %q is not HOST:PORT", r.Host))
			return
		}
		out, err := net.DialTimeout("tcp", r.Host, relayDialTimeout)
		if err != nil {
			http.Error(w, oneLine(err), http.StatusBadGateway)
			return
		}
		h, ok := w.(http.Hijacker)
		if !ok {
			out.Close()
			http.Error(w, "connection cannot be taken over", http.StatusInternalServerError)
			return
		}
		in, rw, err := h.Hijack()
		if err != nil {
			out.Close()
			logger.Printf("CONNECT %s: %v", r.Host, err)
			return
		}
		// The client waits for this answer before it sends anything, so
		// rw holds no bytes of the tunnel.
		if _, err = rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err == nil {
			err = rw.Flush()
		}
		tcpIn, ok := in.(*net.TCPConn)
		if err != nil || !ok || rw.Reader.Buffered() > 0 {
			logger.Printf("CONNECT %s: cannot tunnel (err %v, TCP %v, %d bytes early)", r.Host, err, ok, rw.Reader.Buffered())
			in.Close()
			out.Close()
			return
		}
		_ = proxy(tcpIn, out.(*net.TCPConn))
	})
}
