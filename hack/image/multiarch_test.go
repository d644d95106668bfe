// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// otherArch is the architecture the second image of an index is built for.
func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

// otherBinary is the test program built for otherArch, under the same name.
func otherBinary(t *testing.T) string {
	t.Helper()
	bin := testBinary(t) // also writes the source
	out := filepath.Join(filepath.Dir(bin), otherArch(), "hello")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = filepath.Join(filepath.Dir(bin), "src")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+otherArch(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s: %v\n%s", otherArch(), err, b)
	}
	return out
}

var ociLabels = []string{
	"--label", "org.opencontainers.image.source=https://github.com/evictd/evictd",
	"--label", "org.opencontainers.image.revision=0123abc",
	"--label", "org.opencontainers.image.version=v9.9.9",
	"--label", "org.opencontainers.image.licenses=Apache-2.0",
}

// Two executables make an OCI image index: one manifest per platform, each
// image with the labels, and the archive reproducible.
func TestMultiPlatformIndex(t *testing.T) {
	host, other := testBinary(t), otherBinary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "hello.tar")
	args := append([]string{"--binary", host, "--binary", other, "--name", "hello:v1", "--out", out}, ociLabels...)
	stdout := runOK(t, noEnv, args...)
	out2 := filepath.Join(dir, "again.tar")
	runOK(t, noEnv, append(slices.Clone(args[:len(args)-len(ociLabels)-1]), append([]string{out2}, ociLabels...)...)...)
	if fileSHA(t, out) != fileSHA(t, out2) {
		t.Error("two builds of the same index differ")
	}
	layoutDir := filepath.Join(dir, "layout")
	untar(t, out, layoutDir)
	top, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("index.json: %+v, want one OCI image index", tm.Manifests)
	}
	if got := tm.Manifests[0].Annotations["io.containerd.image.name"]; got != "docker.io/library/hello:v1" {
		t.Errorf("io.containerd.image.name %q", got)
	}
	if !strings.Contains(stdout, "digest:   "+tm.Manifests[0].Digest.String()) {
		t.Errorf("output does not print the index digest %s:\n%s", tm.Manifests[0].Digest, stdout)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != d.Platform.Architecture {
			t.Errorf("manifest for %s holds a %s config", d.Platform.Architecture, cfg.Architecture)
		}
		if cfg.Config.Labels["org.opencontainers.image.revision"] != "0123abc" || cfg.Config.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
			t.Errorf("%s labels %v", d.Platform.Architecture, cfg.Config.Labels)
		}
		if ep := cfg.Config.Entrypoint; len(ep) != 1 || ep[0] != "/hello" {
			t.Errorf("%s entrypoint %v", d.Platform.Architecture, ep)
		}
	}
	slices.Sort(platforms)
	want := []string{"linux/" + runtime.GOARCH, "linux/" + otherArch()}
	slices.Sort(want)
	if !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
}

// --push writes the index to a registry (here one in memory on loopback),
// where it reads back with the same digest.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/evictd/hello:v2"
	stdout := runOK(t, noEnv, "--binary", testBinary(t), "--binary", otherBinary(t), "--name", ref, "--push")
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(r)
	if err != nil {
		t.Fatalf("the pushed index: %v", err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "digest:   "+d.String()) {
		t.Errorf("pushed digest %s, output:\n%s", d, stdout)
	}
	// Both architectures are in the registry: what `skopeo copy --all`
	// (docs/install.md) copies from the archive, and skopeo without --all
	// would not.
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		if m.Platform != nil {
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		}
	}
	slices.Sort(platforms)
	want := []string{"linux/" + runtime.GOARCH, "linux/" + otherArch()}
	slices.Sort(want)
	if !slices.Equal(platforms, want) {
		t.Errorf("the pushed index holds %v; want %v", platforms, want)
	}
}

func TestRejectsMultiPlatformMistakes(t *testing.T) {
	bin, other := testBinary(t), otherBinary(t)
	out := filepath.Join(t.TempDir(), "x.tar")
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"docker-archive of two", []string{"--binary", bin, "--binary", other, "--name", "a:b", "--out", out, "--format", "docker-archive"}, "holds one platform"},
		{"one platform twice", []string{"--binary", bin, "--binary", bin, "--name", "a:b", "--out", out}, "are both for linux/" + runtime.GOARCH},
		{"out and push", []string{"--binary", bin, "--name", "a:b", "--out", out, "--push"}, "not both"},
		{"neither", []string{"--binary", bin, "--name", "a:b"}, "--out is required"},
		{"bad label", []string{"--binary", bin, "--name", "a:b", "--out", out, "--label", "novalue"}, "KEY=VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, noEnv, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("exit %d, stderr %q; want a failure mentioning %q", code, stderr.String(), tc.msg)
			}
		})
	}
}
