// SPDX-License-Identifier: Apache-2.0

//go:build vmnode

package vmnode

import (
	"context"
	"strings"
	"testing"
)

// TestNodePeersStart: each peer evictd is measured against (make
// bench-peers, outside make test) installs and starts on the systemd node
// as the bench starts it, watches what it should, and stops leaving the
// node as it was: earlyoom with Debian's defaults and tuned, systemd-oomd
// on kubepods.slice.
func TestNodePeersStart(t *testing.T) {
	n := sharedNode(t)
	if n.CgroupDriver != Systemd {
		t.Fatalf("the node runs the %s cgroup driver: systemd-oomd needs kubepods.slice, the systemd driver's", n.CgroupDriver)
	}
	ctx := context.Background()
	for _, p := range Peers {
		t.Run(p.Name, func(t *testing.T) {
			t.Cleanup(func() {
				if err := n.StopPeer(ctx, p); err != nil {
					t.Error(err)
				}
			})
			out, err := n.StartPeer(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s runs:\n%s", p.Name, out)
			switch p.Name {
			case PeerEarlyoom.Name:
				// The packaged defaults: 10 % of memory and of swap.
				if !strings.Contains(out, "mem <= 10.00%") {
					t.Errorf("earlyoom does not run at its packaged 10 %%: %q", out)
				}
			case PeerEarlyoomTuned.Name:
				if !strings.Contains(out, "kubelet") {
					t.Errorf("tuned earlyoom does not say it avoids the kubelet: %q", out)
				}
			case PeerOomd.Name:
				if !strings.Contains(out, "/kubepods.slice") {
					t.Errorf("systemd-oomd does not monitor kubepods.slice: %q", out)
				}
			}
		})
	}
}
