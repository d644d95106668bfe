// SPDX-License-Identifier: Apache-2.0

package options

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOptionsEvictionRequestFromConfig: --eviction-request and its wait are
// fields of the config file as well (evictionRequest,
// evictionRequestResponderWait); a flag given on the command line overrides
// the file, one not given leaves it; a bad value is ErrUsage naming it.
func TestOptionsEvictionRequestFromConfig(t *testing.T) {
	header := "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\n"
	tests := []struct {
		name    string
		file    string // "" for no --config
		args    []string
		on      bool
		wait    time.Duration
		wantErr string
	}{
		{name: "defaults", on: false, wait: time.Minute},
		{name: "flags alone", args: []string{"--eviction-request", "--eviction-request-responder-wait=20s"}, on: true, wait: 20 * time.Second},
		{name: "file alone", file: "evictionRequest: true\nevictionRequestResponderWait: 2m\n", on: true, wait: 2 * time.Minute},
		{name: "file on, wait defaulted", file: "evictionRequest: true\n", on: true, wait: time.Minute},
		{name: "flag over file", file: "evictionRequest: true\nevictionRequestResponderWait: 2m\n",
			args: []string{"--eviction-request=false", "--eviction-request-responder-wait=5s"}, on: false, wait: 5 * time.Second},
		{name: "file wait out of bounds", file: "evictionRequest: true\nevictionRequestResponderWait: 2h\n",
			wantErr: "evictionRequestResponderWait 2h0m0s (--eviction-request-responder-wait) must be within 1s..1h0m0s"},
		{name: "flag wait out of bounds over a good file", file: "evictionRequestResponderWait: 2m\n", args: []string{"--eviction-request-responder-wait=500ms"},
			wantErr: "evictionRequestResponderWait 500ms"},
		{name: "file wait not a duration", file: "evictionRequestResponderWait: soon\n", wantErr: "soon"},
		{name: "file switch not a boolean", file: "evictionRequest: maybe\n", wantErr: "evictionRequest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "evictd.yaml")
				if err := os.WriteFile(path, []byte(header+tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--config=" + path}, args...)
			}
			o, err := parsedOptions(t, args)
			if err == nil {
				err = o.Validate()
			}
			if tc.wantErr != "" {
				if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v; want one line of ErrUsage containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.EvictionRequest != tc.on || o.EvictionRequestWait != tc.wait {
				t.Errorf("eviction request %v, wait %s; want %v, %s", o.EvictionRequest, o.EvictionRequestWait, tc.on, tc.wait)
			}
		})
	}
}
