// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// heavyPackages must stay out of evictd's binary: each registers every
// built-in API group at start-up, about 10 MiB of resident memory that
// evictd does not need (docs/performance.md, "The RSS floor"). pkg/kube is
// the client evictd uses instead.
var heavyPackages = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/kubernetes/scheme",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/discovery",
	// Events' broadcaster and recorder need the scheme above: +7.1 MiB of
	// idle RSS, measured (docs/performance.md); pkg/evict writes its own.
	"k8s.io/client-go/tools/events",
	"k8s.io/client-go/tools/record",
	"github.com/evictd/evictd/pkg/kube/fromclientset",
}

// TestNoClientset fails if evictd's dependency graph holds client-go's
// clientset, its scheme, its informer factory or discovery again.
func TestNoClientset(t *testing.T) {
	goBin, err := exec.LookPath("go")
	// Fails in CI (CI=true), skips elsewhere.
	cgrouptest.Need(t, err == nil, fmt.Sprintf("no go command to list evictd's dependencies: %v", err))
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	if !deps["github.com/evictd/evictd/pkg/kube"] {
		t.Fatalf("go list -deps does not list pkg/kube; the list is not evictd's:\n%s", out)
	}
	for _, p := range heavyPackages {
		if deps[p] {
			t.Errorf("evictd depends on %s again; talk to the API server through pkg/kube (find who imports it: go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/evictd | grep %s)", p, p)
		}
	}
	// The informer factory's packages are many; any of them counts.
	for p := range deps {
		if strings.HasPrefix(p, "k8s.io/client-go/informers/") || strings.HasPrefix(p, "k8s.io/client-go/kubernetes/") {
			t.Errorf("evictd depends on %s", p)
		}
	}
}
