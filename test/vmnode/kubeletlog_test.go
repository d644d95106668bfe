// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"slices"
	"testing"
)

// A kubelet's log as the node writes it: klog lines, and the flag and
// config notices the kubelet prints without a klog header.
const kubeletLogFixture = `Flag --hostname-override has been deprecated, This parameter should be set via the config file specified by the Kubelet's --config flag.
I1124 17:56:19.103822     214 server.go:530] "Kubelet version" kubeletVersion="v1.35.4"
W1124 17:56:19.104100     214 codec.go:89] "Strict decoding error" err="unknown field \"x\""
I1124 17:56:19.251177     214 server.go:954] "Client rotation is on, will bootstrap in background"
E1124 17:56:19.402511     214 kubelet.go:1622] "Image garbage collection failed once. Stats initialization may not have completed yet"
Warning: this line has no klog header
W1124 17:56:20.000001     214 manager.go:12] "third"
I1124 17:56:21.000000     214 kubelet_node_status.go:78] "Successfully registered node" node="evictd-vm"
`

func TestKlogComplaints(t *testing.T) {
	first, total := klogComplaints([]byte(kubeletLogFixture), 2)
	if total != 3 {
		t.Errorf("total = %d, want 3 (two W lines, one E line)", total)
	}
	want := []string{
		`W1124 17:56:19.104100     214 codec.go:89] "Strict decoding error" err="unknown field \"x\""`,
		`E1124 17:56:19.402511     214 kubelet.go:1622] "Image garbage collection failed once. Stats initialization may not have completed yet"`,
	}
	if !slices.Equal(first, want) {
		t.Errorf("first = %q, want %q", first, want)
	}
	if first, total := klogComplaints(nil, 5); first != nil || total != 0 {
		t.Errorf("empty log: %q, %d", first, total)
	}
}
