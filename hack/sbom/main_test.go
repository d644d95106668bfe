// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
)

// The test binary itself is a Go binary with build information: the
// document describes it, lists the standard library at the toolchain's
// version, and is the same bytes when made twice.
func TestDocument(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--name", "evictd", "--version", "9.9.9", "--created", "2026-01-02T03:04:05+01:00", self}
	var a, b bytes.Buffer
	if err := run(args, &a); err != nil {
		t.Fatal(err)
	}
	if err := run(args, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two documents of the same binary differ")
	}
	var doc document
	if err := json.Unmarshal(a.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2026-01-02T02:04:05Z" || doc.Name != "evictd-9.9.9" {
		t.Errorf("document header %q %q %q", doc.SPDXVersion, doc.CreationInfo.Created, doc.Name)
	}
	var bin, stdlib *pkg
	for i, p := range doc.Packages {
		switch {
		case p.Purpose == "APPLICATION":
			bin = &doc.Packages[i]
		case p.Name == "stdlib":
			stdlib = &doc.Packages[i]
		}
	}
	if bin == nil || bin.VersionInfo != "9.9.9" || len(bin.Checksums) != 1 || len(bin.Checksums[0].Value) != 64 {
		t.Fatalf("binary package %+v", bin)
	}
	if stdlib == nil || stdlib.VersionInfo != runtime.Version() {
		t.Errorf("stdlib package %+v; want version %s", stdlib, runtime.Version())
	}
	want := relationship{"SPDXRef-DOCUMENT", "DESCRIBES", bin.SPDXID}
	if doc.Relationships[0] != want {
		t.Errorf("first relationship %+v; want %+v", doc.Relationships[0], want)
	}
	for _, p := range doc.Packages {
		if !strings.HasPrefix(p.SPDXID, "SPDXRef-") || idUnsafe.MatchString(strings.TrimPrefix(p.SPDXID, "SPDXRef-")) {
			t.Errorf("SPDXID %q is not an SPDX identifier", p.SPDXID)
		}
	}
}

func TestBadInput(t *testing.T) {
	self, _ := os.Executable()
	for _, tc := range []struct {
		args   []string
		naming string
	}{
		{[]string{"--version", "1", "--created", "2026-01-02T03:04:05Z", self}, "--name"},
		{[]string{"--name", "x", "--created", "2026-01-02T03:04:05Z", self}, "--version"},
		{[]string{"--name", "x", "--version", "1", "--created", "yesterday", self}, "yesterday"},
		{[]string{"--name", "x", "--version", "1", "--created", "2026-01-02T03:04:05Z"}, "no binary"},
		{[]string{"--name", "x", "--version", "1", "--created", "2026-01-02T03:04:05Z", "go.mod"}, "go.mod"},
	} {
		err := run(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.naming) {
			t.Errorf("%q: %v; want an error naming %s", tc.args, err, tc.naming)
		}
	}
}

func TestModuleReplaceAndEscape(t *testing.T) {
	if got := escapeModulePath("github.com/BurntSushi/toml"); got != "github.com/!burnt!sushi/toml" {
		t.Errorf("escape %q", got)
	}
	if got := purl("github.com/docker/cli", "v29.7.2+incompatible"); got != "pkg:golang/github.com/docker/cli@v29.7.2+incompatible" && got != "pkg:golang/github.com/docker/cli@v29.7.2%2Bincompatible" {
		t.Errorf("purl %q", got)
	}
}
