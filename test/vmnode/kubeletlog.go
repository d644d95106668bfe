// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"bufio"
	"bytes"
)

// klogComplaints returns the kubelet's warning and error lines in log (the
// klog header's severity letter W or E, then the month and day:
// "W1124 17:56:21.123456     123 server.go:123] ..."), the first max of
// them, and how many there were. The node logs them when it is Ready, so a
// run against another Kubernetes release (make e2e-node-smoke KUBE_VERSION)
// shows what that kubelet made of the configuration and flags the node
// gives it.
func klogComplaints(log []byte, max int) (first []string, total int) {
	s := bufio.NewScanner(bytes.NewReader(log))
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !isKlogHeader(line, 'W') && !isKlogHeader(line, 'E') {
			continue
		}
		total++
		if len(first) < max {
			first = append(first, line)
		}
	}
	return first, total
}

// isKlogHeader: line starts with severity, four digits (mmdd) and a space.
func isKlogHeader(line string, severity byte) bool {
	if len(line) < 6 || line[0] != severity || line[5] != ' ' {
		return false
	}
	for _, c := range []byte(line[1:5]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
