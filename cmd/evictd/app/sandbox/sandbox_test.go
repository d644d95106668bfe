// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/evictd/evictd/pkg/options"
)

func TestParseKind(t *testing.T) {
	for _, s := range []string{"seccomp", "none"} {
		if k, err := ParseKind(s); err != nil || string(k) != s {
			t.Errorf("ParseKind(%q) = %q, %v", s, k, err)
		}
	}
	for _, s := range []string{"", "landlock", "Seccomp", "seccomp,none"} {
		_, err := ParseKind(s)
		if err == nil || !strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("ParseKind(%q): %v, want an error naming the value", s, err)
		}
	}
}

// TestFilterAssembles: the policy names only calls this architecture's
// table knows, refuses both with errno and allows the rest.
func TestFilterAssembles(t *testing.T) {
	f := Filter()
	if _, err := f.Policy.Assemble(); err != nil {
		t.Fatal(err)
	}
	if !f.NoNewPrivs || f.Flag.String() != "tsync" {
		t.Errorf("filter: no_new_privs %v, flag %s; want true, tsync", f.NoNewPrivs, f.Flag)
	}
	if got := f.Policy.DefaultAction.String(); got != "allow" {
		t.Errorf("default action %s, want allow", got)
	}
	if g := f.Policy.Syscalls; len(g) != 1 || g[0].Action.String() != "errno" || strings.Join(g[0].Names, ",") != "open_by_handle_at,name_to_handle_at" {
		t.Errorf("refused groups %+v, want errno for open_by_handle_at and name_to_handle_at", g)
	}
}

func TestVerdict(t *testing.T) {
	if err := verdict(syscall.EPERM); err != nil {
		t.Errorf("EPERM: %v, want refused", err)
	}
	if err := verdict(nil); !errors.Is(err, ErrNotRefused) {
		t.Errorf("success: %v, want ErrNotRefused", err)
	}
	if err := verdict(syscall.EOPNOTSUPP); err == nil || !strings.Contains(err.Error(), "not EPERM") {
		t.Errorf("EOPNOTSUPP: %v, want an error naming it", err)
	}
}

func TestEnterNone(t *testing.T) {
	r, err := Enter(None)
	if err != nil || r.Active || r.Kind != None {
		t.Errorf("Enter(none) = %+v, %v", r, err)
	}
	if _, err := Enter("landlock"); err == nil || !strings.Contains(err.Error(), `"landlock"`) {
		t.Errorf("Enter(landlock): %v, want an error naming it", err)
	}
}

// TestKindsAreTheFlagsValues: pkg/options validates --sandbox with its own
// constants (it cannot import this room); they must be these kinds.
func TestKindsAreTheFlagsValues(t *testing.T) {
	if got, want := []Kind{Seccomp, None}, []Kind{options.SandboxSeccomp, options.SandboxNone}; !slices.Equal(got, want) || !slices.Equal(Kinds, want) {
		t.Errorf("kinds %v, --sandbox's values %v", Kinds, want)
	}
	if options.NewOptions().Sandbox != string(Kinds[0]) {
		t.Errorf("--sandbox defaults to %q, want %q", options.NewOptions().Sandbox, Kinds[0])
	}
}
