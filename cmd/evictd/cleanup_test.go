// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"testing"
)

// TestCleanupBadUsage: each bad value gets exit 2 and one line on stderr
// naming it, before anything talks to a cluster.
func TestCleanupBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--delete-daemonset=evictd"}, "evictd cleanup: invalid --delete-daemonset: DaemonSet \"evictd\": want namespace/name\n"},
		{[]string{"--timeout=0s"}, "evictd cleanup: invalid --timeout 0s: want a positive duration\n"},
		{[]string{"--timeout=1m"}, "evictd cleanup: no install to take back: give --delete-daemonset NAMESPACE/NAME or --install NAMESPACE/NAME (the install's DaemonSet)\n"},
		{[]string{"--install=evictd"}, "evictd cleanup: invalid --install: install \"evictd\": want NAMESPACE/NAME, the install's DaemonSet\n"},
		{[]string{"--delete-daemonset=Evictd/evictd"}, ""},
		{[]string{"--node-lease-namespace="}, "evictd cleanup: invalid --node-lease-namespace \"\": want a namespace\n"},
		{[]string{"now"}, "evictd cleanup: unexpected argument \"now\"\n"},
		{[]string{"--log-level=loud"}, ""},
	} {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), append([]string{"cleanup", "--kubeconfig=/nonexistent"}, tc.args...), &out, &errb)
		if code != exitUsage || out.Len() > 0 || bytes.Count(errb.Bytes(), []byte("\n")) != 1 || (tc.want != "" && errb.String() != tc.want) {
			t.Errorf("evictd cleanup %v: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out.String(), errb.String(), exitUsage, tc.want)
		}
	}
}
