// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testBinary compiles a tiny static program into a temporary directory,
// once per test binary run.
var testBinary = func() func(t *testing.T) string {
	var bin string
	var buildErr error
	return func(t *testing.T) string {
		t.Helper()
		if bin == "" && buildErr == nil {
			bin, buildErr = buildHello()
		}
		if buildErr != nil {
			t.Fatal(buildErr)
		}
		return bin
	}
}()

var scratch string // removed by TestMain

func TestMain(m *testing.M) {
	code := m.Run()
	if scratch != "" {
		os.RemoveAll(scratch)
	}
	os.Exit(code)
}

func buildHello() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	scratch, err = os.MkdirTemp("", "hack-image-test-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(scratch, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nfunc main() { println(\"hello\") }\n",
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(src, f), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(scratch, "hello")
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err, out}
	}
	return bin, nil
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + string(e.out) }

func noEnv(string) string { return "" }

// runOK runs the command and returns its stdout.
func runOK(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, getenv, &stdout, &stderr); code != 0 {
		t.Fatalf("run %v: exit %d, stderr: %s", args, code, stderr.String())
	}
	return stdout.String()
}

func fileSHA(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestOCILayout(t *testing.T) {
	bin := testBinary(t)
	dir := t.TempDir()
	out1, out2 := filepath.Join(dir, "a", "hello.tar"), filepath.Join(dir, "b", "hello.tar")
	stdout := runOK(t, noEnv, "--binary", bin, "--name", "hello:v1", "--out", out1)
	runOK(t, noEnv, "--binary", bin, "--name", "hello:v1", "--out", out2)

	// Reproducible: the same input gives the same archive, byte for byte.
	if fileSHA(t, out1) != fileSHA(t, out2) {
		t.Fatal("two builds of the same input differ")
	}

	// The archive is an OCI image layout: oci-layout, index.json, blobs.
	layoutDir := filepath.Join(dir, "layout")
	untar(t, out1, layoutDir)
	if b, err := os.ReadFile(filepath.Join(layoutDir, "oci-layout")); err != nil || !strings.Contains(string(b), `"imageLayoutVersion"`) {
		t.Fatalf("oci-layout: %q, %v", b, err)
	}
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", desc.MediaType, types.OCIManifestSchema1)
	}
	wantAnn := map[string]string{
		"io.containerd.image.name":          "docker.io/library/hello:v1",
		"org.opencontainers.image.ref.name": "v1",
	}
	if !reflect.DeepEqual(desc.Annotations, wantAnn) {
		t.Errorf("annotations %v, want %v", desc.Annotations, wantAnn)
	}
	if !strings.Contains(stdout, "digest:   "+desc.Digest.String()) {
		t.Errorf("output does not print the manifest digest %s:\n%s", desc.Digest, stdout)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img, bin, time.Unix(0, 0))
	layers, _ := img.Layers()
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}

	// The creation time comes from SOURCE_DATE_EPOCH and is part of the digest.
	out3 := filepath.Join(dir, "c", "hello.tar")
	epoch := func(k string) string {
		if k == "SOURCE_DATE_EPOCH" {
			return "1700000000"
		}
		return ""
	}
	stdout3 := runOK(t, epoch, "--binary", bin, "--name", "hello:v1", "--out", out3)
	if stdout3 == stdout || fileSHA(t, out3) == fileSHA(t, out1) {
		t.Error("a different SOURCE_DATE_EPOCH gave the same image")
	}
}

func TestDockerArchive(t *testing.T) {
	bin := testBinary(t)
	dir := t.TempDir()
	out1, out2 := filepath.Join(dir, "1.tar"), filepath.Join(dir, "2.tar")
	args := []string{"--binary", bin, "--name", "example.com/x/hello:v2", "--format", "docker-archive",
		"--entrypoint", "/bin/hello", "--user", "0:0"}
	runOK(t, noEnv, append(args, "--out", out1)...)
	runOK(t, noEnv, append(args, "--out", out2)...)
	if fileSHA(t, out1) != fileSHA(t, out2) {
		t.Fatal("two builds of the same input differ")
	}
	tag, _ := name.NewTag("example.com/x/hello:v2")
	img, err := tarball.ImageFromPath(out1, &tag)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(out1) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, []string{"example.com/x/hello:v2"}) {
		t.Errorf("manifest.json %+v, want one image tagged example.com/x/hello:v2", m)
	}
	checkImage(t, img, bin, time.Unix(0, 0), "/bin/hello", "0:0")
}

// checkImage checks the one layer and the config; want is the entrypoint and
// the user when they are not the defaults.
func checkImage(t *testing.T, img v1.Image, bin string, created time.Time, want ...string) *v1.ConfigFile {
	t.Helper()
	base := filepath.Base(bin)
	entrypoint, user := "/"+base, "65532:65532"
	if len(want) == 2 {
		entrypoint, user = want[0], want[1]
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	var n int
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if hdr.Name != base || hdr.Typeflag != tar.TypeReg {
			t.Errorf("layer entry %q (type %c), want the regular file %q", hdr.Name, hdr.Typeflag, base)
			continue
		}
		if hdr.Mode&0o7777 != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("%s: mode %o owner %d:%d, want 755 0:0", hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid)
		}
		if !hdr.ModTime.Equal(created) {
			t.Errorf("%s: mtime %v, want %v", hdr.Name, hdr.ModTime, created)
		}
		got, _ := io.ReadAll(tr)
		if !bytes.Equal(got, exe) {
			t.Errorf("%s: content differs from %s", hdr.Name, bin)
		}
	}
	if n != 1 {
		t.Errorf("layer has %d entries, want 1", n)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if !reflect.DeepEqual(cfg.Config.Entrypoint, []string{entrypoint}) || cfg.Config.Cmd != nil {
		t.Errorf("entrypoint %q cmd %q, want [%s] and none", cfg.Config.Entrypoint, cfg.Config.Cmd, entrypoint)
	}
	if cfg.Config.User != user {
		t.Errorf("user %q, want %q", cfg.Config.User, user)
	}
	if !cfg.Created.Equal(created) {
		t.Errorf("created %v, want %v", cfg.Created.Time, created)
	}
	if len(cfg.RootFS.DiffIDs) != 1 || len(cfg.History) != 1 {
		t.Errorf("rootfs %v history %v, want one layer", cfg.RootFS.DiffIDs, cfg.History)
	}
	return cfg
}

func TestRejects(t *testing.T) {
	bin := testBinary(t)
	out := filepath.Join(t.TempDir(), "x.tar")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no binary", []string{"--name", "a:b", "--out", out}, 2, "--binary is required"},
		{"bad format", []string{"--binary", bin, "--name", "a:b", "--out", out, "--format", "zip"}, 2, "--format"},
		{"named user", []string{"--binary", bin, "--name", "a:b", "--out", out, "--user", "nonroot"}, 2, "numeric"},
		{"bad name", []string{"--binary", bin, "--name", "A B", "--out", out}, 1, "--name"},
		{"not ELF", []string{"--binary", filepath.Join(filepath.Dir(bin), "src", "main.go"), "--name", "a:b", "--out", out}, 1, "not a Linux executable"},
		{"wrong arch", []string{"--binary", bin, "--name", "a:b", "--out", out, "--arch", "nope"}, 1, "is built for " + runtime.GOARCH},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, noEnv, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr.String(), tc.code, tc.msg)
			}
		})
	}
	// A dynamically linked executable has nothing to run with in the image.
	if sh, err := exec.LookPath("sh"); err == nil {
		var stdout, stderr bytes.Buffer
		code := run([]string{"--binary", sh, "--name", "a:b", "--out", out}, noEnv, &stdout, &stderr)
		if isDynamic(sh) && (code != 1 || !strings.Contains(stderr.String(), "CGO_ENABLED=0")) {
			t.Errorf("%s: exit %d, stderr %q; want it refused as dynamically linked", sh, code, stderr.String())
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed build left %s", out)
	}
}

func isDynamic(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// untar extracts a tar of regular files and directories into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(hdr.Name) {
			t.Fatalf("unsafe path %q in %s", hdr.Name, archive)
		}
		p := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, b, 0o644)
				}
			}
		default:
			t.Fatalf("%s: unexpected entry %q of type %c", archive, hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
