// SPDX-License-Identifier: Apache-2.0

package arch

import (
	"bufio"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The control plane's module (hack/cluster) keeps every library it shares
// with evictd's module at evictd's version or above: a package compiles once
// for both only when the whole tree under it has the same versions, and
// golang.org/x/sys sits under nearly all of client-go. Measured from an empty
// build cache after make build: the control plane's binaries took 832 s of
// CPU with the control plane's own, older versions and 730 s with evictd's.
func TestControlPlaneSharesEvictdsLibraries(t *testing.T) {
	root := filepath.Join("..", "..")
	evictd := requires(t, filepath.Join(root, "go.mod"))
	cluster := requires(t, filepath.Join(root, "hack", "cluster", "go.mod"))
	if len(evictd) == 0 || len(cluster) == 0 {
		t.Fatalf("read %d requirements from go.mod and %d from hack/cluster/go.mod; want some in both", len(evictd), len(cluster))
	}
	shared := 0
	for _, mod := range slices.Sorted(maps.Keys(evictd)) {
		v := evictd[mod]
		cv, ok := cluster[mod]
		if !ok {
			continue
		}
		shared++
		if compareVersions(cv, v) < 0 {
			t.Errorf("hack/cluster/go.mod has %s %s, evictd's go.mod %s: run go get %s@%s in hack/cluster", mod, cv, v, mod, v)
		}
	}
	if shared < 20 {
		t.Errorf("only %d modules in both go.mod files; the requirement lists were not read whole", shared)
	}
}

// requires reads a go.mod's require directives (single and block, direct and
// indirect) and the versions its replace directives pin a module to: the
// version each module builds at.
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	replaced := map[string]string{}
	block := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case line == "":
			continue
		case line == ")":
			block = ""
			continue
		case strings.HasSuffix(line, "("):
			block = strings.TrimSpace(strings.TrimSuffix(line, "("))
			continue
		}
		verb := block
		if verb == "" {
			verb, line, _ = strings.Cut(line, " ")
		}
		fields := strings.Fields(line)
		switch verb {
		case "require":
			if len(fields) == 2 {
				out[fields[0]] = fields[1]
			}
		case "replace":
			// mod [v] => mod2 v2: a module version, not a directory.
			if i := slices.Index(fields, "=>"); i >= 0 && len(fields) == i+3 {
				replaced[fields[0]] = fields[i+2]
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for mod, v := range replaced {
		if _, ok := out[mod]; ok {
			out[mod] = v
		}
	}
	return out
}

// compareVersions orders two semantic versions as Go modules do (a
// pseudo-version is a pre-release): -1, 0 or 1.
func compareVersions(a, b string) int {
	ac, ap := splitVersion(a)
	bc, bp := splitVersion(b)
	for i := range 3 {
		if c := compareNumbers(ac[i], bc[i]); c != 0 {
			return c
		}
	}
	switch {
	case ap == bp:
		return 0
	case ap == "":
		return 1
	case bp == "":
		return -1
	}
	ai, bi := strings.Split(ap, "."), strings.Split(bp, ".")
	for i := 0; i < len(ai) && i < len(bi); i++ {
		an, aerr := strconv.ParseUint(ai[i], 10, 64)
		bn, berr := strconv.ParseUint(bi[i], 10, 64)
		var c int
		switch {
		case aerr == nil && berr == nil:
			c = compareUints(an, bn)
		case aerr == nil:
			c = -1 // numeric identifiers sort first
		case berr == nil:
			c = 1
		default:
			c = strings.Compare(ai[i], bi[i])
		}
		if c != 0 {
			return c
		}
	}
	return compareUints(uint64(len(ai)), uint64(len(bi)))
}

// splitVersion parses vMAJOR.MINOR.PATCH[-PRE][+BUILD] into its three
// numbers (as strings) and the pre-release.
func splitVersion(v string) ([3]string, string) {
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "+")
	core, pre, _ := strings.Cut(v, "-")
	var nums [3]string
	for i, n := range strings.SplitN(core, ".", 3) {
		nums[i] = n
	}
	return nums, pre
}

func compareNumbers(a, b string) int {
	an, _ := strconv.ParseUint(a, 10, 64)
	bn, _ := strconv.ParseUint(b, 10, 64)
	return compareUints(an, bn)
}

func compareUints(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestCompareVersions(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"v0.49.0", "v0.47.0", 1},
		{"v1.4.3", "v1.4.4", -1},
		{"v1.36.12", "v1.36.12-0.20260120151049-f2248ac996af", 1},
		{"v0.0.0-20260707023825-cf1189d6abe3", "v0.0.0-20260626114624-be93311217bd", 1},
		{"v22.5.0", "v22.5.0", 0},
		{"v0.10.0", "v0.9.0", 1},
		{"v3.4.0+incompatible", "v3.4.0", 0},
	} {
		if got := compareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
