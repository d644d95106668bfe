// SPDX-License-Identifier: Apache-2.0

package cmdutil

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPublishEnv(t *testing.T) {
	const env = "A=1\nB=2\n"
	dir := t.TempDir()
	tests := []struct {
		name     string
		path     string
		perm     os.FileMode
		wantErr  string
		wantFile bool
	}{
		{name: "stdout only", path: ""},
		{name: "private file", path: filepath.Join(dir, "a.env"), perm: 0o600, wantFile: true},
		{name: "shared file", path: filepath.Join(dir, "b.env"), perm: 0o644, wantFile: true},
		{name: "unwritable", path: filepath.Join(dir, "missing", "c.env"), perm: 0o600, wantErr: "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := PublishEnv(&out, env, tt.path, tt.perm)
			if out.String() != env {
				t.Errorf("printed %q, want %q", out.String(), env)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantFile {
				return
			}
			b, err := os.ReadFile(tt.path)
			if err != nil || string(b) != env {
				t.Fatalf("file holds %q, %v; want %q", b, err, env)
			}
			st, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm() &^ 0o022; got != tt.perm&^0o022 {
				t.Errorf("mode %v, want %v (less umask)", st.Mode().Perm(), tt.perm)
			}
		})
	}
}
