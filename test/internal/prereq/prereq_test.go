package prereq

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder stands in for a test so that Require's verdict can be observed
// without ending the real test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Skipf(f string, args ...any)  { r.skipped = fmt.Sprintf(f, args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }

func TestRequire(t *testing.T) {
	tests := []struct {
		name     string
		ci       string
		err      error
		wantSkip bool
		wantFail bool
	}{
		{name: "met", ci: "true", err: nil},
		{name: "missing outside CI", ci: "", err: errors.New("no root"), wantSkip: true},
		{name: "missing in CI", ci: "true", err: errors.New("no root"), wantFail: true},
		{name: "CI=false is not CI", ci: "false", err: errors.New("no root"), wantSkip: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			r := &recorder{}
			Require(r, tt.err)
			if (r.skipped != "") != tt.wantSkip || (r.failed != "") != tt.wantFail {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tt.wantSkip, tt.wantFail)
			}
			for _, msg := range []string{r.skipped, r.failed} {
				if msg != "" && tt.err != nil && !strings.Contains(msg, tt.err.Error()) {
					t.Errorf("message %q does not name the reason", msg)
				}
			}
		})
	}
}
