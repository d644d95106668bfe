// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
	"time"
)

// The file's evictionRequest fields decode strictly, default, and are
// bounded; a bad value is one error naming it.
func TestEvictionRequestFile(t *testing.T) {
	head := "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\n"
	for _, tc := range []struct {
		body    string
		on      bool
		wait    time.Duration
		wantErr string
	}{
		{body: "", wait: time.Minute},
		{body: "evictionRequest: true\n", on: true, wait: time.Minute},
		{body: "evictionRequest: true\nevictionRequestResponderWait: 1h\n", on: true, wait: time.Hour},
		{body: "evictionRequestResponderWait: 1s\n", wait: time.Second},
		{body: "evictionRequestResponderWait: 999ms\n", wantErr: "evictionRequestResponderWait 999ms (--eviction-request-responder-wait) must be within 1s..1h0m0s"},
		{body: "evictionRequestResponderWait: -1m\n", wantErr: "evictionRequestResponderWait -1m0s"},
		{body: "evictionRequestResponderWait: soon\n", wantErr: `evictionRequestResponderWait: time: invalid duration "soon"`},
		{body: "evictionrequest: true\n", wantErr: "evictionrequest"},
	} {
		c, err := Decode([]byte(head + tc.body))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.body, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.body, err)
			continue
		}
		if c.EvictionRequest != tc.on || c.ResponderWait() != tc.wait {
			t.Errorf("%q: %v, %s; want %v, %s", tc.body, c.EvictionRequest, c.ResponderWait(), tc.on, tc.wait)
		}
	}
}
