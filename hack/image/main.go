// Command image writes a container image that holds one static executable,
// the image the Dockerfile builds, without a Docker engine. It is what
// `make image` and `make image-workload` run:
//
//	image --binary _output/bin/evictd --name evictd:dev --out _output/image/evictd-dev.tar
//
// The image has one layer, the executable at /<its base name>, mode 0755,
// owned by 0:0 (as the Dockerfile's COPY leaves it), and a config with the
// Dockerfile's ENTRYPOINT and USER (65532:65532, distroless's nonroot; the
// DaemonSet overrides it with runAsUser 0). There is no base image: evictd is
// static and reads no file of distroless's (no /etc/passwd, CA bundle or
// tzdata is needed; the user is numeric).
//
// The output is reproducible: the same executable, name and creation time
// give the same bytes and the same digest. The creation time is
// $SOURCE_DATE_EPOCH, or the Unix epoch.
//
// Formats:
//
//   - oci-layout (default): an OCI image layout (oci-layout, index.json,
//     blobs/sha256/...) packed as a tar, with OCI media types. Its index.json
//     names the image with io.containerd.image.name (the full reference,
//     docker.io/library/evictd:dev) and org.opencontainers.image.ref.name (the
//     tag), as BuildKit's OCI exporter does, so `ctr -n k8s.io images import`
//     stores it under the name the kubelet looks up, and skopeo, podman and
//     crane read it as oci-archive.
//   - docker-archive: the `docker save` format (manifest.json with RepoTags),
//     for `docker load`; containerd's import reads it too.
//
// Both are written with github.com/google/go-containerregistry: the layout
// package for the first, the tarball package for the second.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	formatOCI    = "oci-layout"
	formatDocker = "docker-archive"

	// defaultUser is the Dockerfile's USER: distroless's nonroot.
	defaultUser = "65532:65532"
	// defaultPath is the PATH Docker and distroless set.
	defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

	// Annotations of an image in index.json, as BuildKit writes them.
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

type options struct {
	binary     string
	name       string
	entrypoint string
	user       string
	arch       string
	out        string
	format     string
	created    time.Time
}

// result is what a build wrote.
type result struct {
	ref      name.Tag
	platform string
	// digest is the manifest's digest: the image's digest in containerd and
	// in a registry. imageID is the config's digest (Docker's image ID), the
	// same in both formats.
	digest, imageID v1.Hash
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: exit code 0 on success, 2 on bad usage,
// 1 when the build fails.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 2
	}
	res, err := build(o)
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %s, %s)\n", o.out, o.format, res.ref, res.platform)
	// A docker-archive holds no manifest (docker load and containerd's
	// import make their own), so only the OCI archive's digest is the one
	// the runtime will show.
	if o.format == formatOCI {
		fmt.Fprintf(stdout, "digest:   %s\n", res.digest)
	}
	fmt.Fprintf(stdout, "image ID: %s\n", res.imageID)
	return 0
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.binary, "binary", "", "the static Linux executable to put in the image (required)")
	fs.StringVar(&o.name, "name", "", "the image reference, e.g. evictd:v1.2.3 (required)")
	fs.StringVar(&o.entrypoint, "entrypoint", "", "the image's entrypoint (default /<base name of --binary>)")
	fs.StringVar(&o.user, "user", defaultUser, "the image's user, numeric UID:GID (there is no /etc/passwd)")
	fs.StringVar(&o.arch, "arch", "", "the image's architecture (default: the executable's, from its ELF header)")
	fs.StringVar(&o.out, "out", "", "the archive to write (required)")
	fs.StringVar(&o.format, "format", formatOCI, "archive format: "+formatOCI+" (an OCI image layout as a tar) or "+formatDocker+" (docker save)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, req := range []struct{ flag, val string }{{"binary", o.binary}, {"name", o.name}, {"out", o.out}} {
		if req.val == "" {
			return o, fmt.Errorf("--%s is required", req.flag)
		}
	}
	if o.format != formatOCI && o.format != formatDocker {
		return o, fmt.Errorf("--format %q: want %s or %s", o.format, formatOCI, formatDocker)
	}
	if o.entrypoint == "" {
		o.entrypoint = "/" + filepath.Base(o.binary)
	}
	if !path.IsAbs(o.entrypoint) {
		return o, fmt.Errorf("--entrypoint %q: want an absolute path", o.entrypoint)
	}
	if !numericUser(o.user) {
		return o, fmt.Errorf("--user %q: want a numeric UID or UID:GID (the image has no /etc/passwd)", o.user)
	}
	o.created = time.Unix(0, 0).UTC()
	if s := getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil || sec < 0 {
			return o, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since the Unix epoch", s)
		}
		o.created = time.Unix(sec, 0).UTC()
	}
	return o, nil
}

func numericUser(u string) bool {
	uid, gid, hasGID := strings.Cut(u, ":")
	isNum := func(s string) bool {
		_, err := strconv.ParseUint(s, 10, 32)
		return err == nil
	}
	return isNum(uid) && (!hasGID || isNum(gid))
}

func build(o options) (result, error) {
	var res result
	ref, err := name.NewTag(o.name)
	if err != nil {
		return res, fmt.Errorf("--name: %w", err)
	}
	res.ref = ref
	arch, err := checkBinary(o.binary)
	if err != nil {
		return res, err
	}
	switch {
	case arch == "" && o.arch == "":
		return res, fmt.Errorf("%s: unknown ELF machine; name the architecture with --arch", o.binary)
	case arch == "":
		arch = o.arch
	case o.arch != "" && o.arch != arch:
		return res, fmt.Errorf("--arch %s, but %s is built for %s", o.arch, o.binary, arch)
	}
	res.platform = "linux/" + arch
	exe, err := os.ReadFile(o.binary)
	if err != nil {
		return res, err
	}
	img, err := image(o, arch, exe)
	if err != nil {
		return res, err
	}
	if res.digest, err = img.Digest(); err != nil {
		return res, err
	}
	if res.imageID, err = img.ConfigName(); err != nil {
		return res, err
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return res, err
	}
	switch o.format {
	case formatDocker:
		err = writeAtomically(o.out, func(w io.Writer) error { return tarball.Write(ref, img, w) })
	default:
		err = writeOCIArchive(o.out, ref, img)
	}
	return res, err
}

// image builds the image: one layer with exe at /<base name>, and the config.
func image(o options, arch string, exe []byte) (v1.Image, error) {
	base := filepath.Base(o.binary)
	layerTar, err := singleFileTar(base, exe, o.created)
	if err != nil {
		return nil, err
	}
	manifestType, configType, layerType := types.OCIManifestSchema1, types.OCIConfigJSON, types.OCILayer
	if o.format == formatDocker {
		manifestType, configType, layerType = types.DockerManifestSchema2, types.DockerConfigJSON, types.DockerLayer
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(layerType))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, manifestType), configType)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.created},
			CreatedBy: fmt.Sprintf("COPY %s /%s # hack/image", base, base),
		},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: o.created}
	cfg.OS = "linux"
	cfg.Architecture = arch
	cfg.Config = v1.Config{
		Entrypoint: []string{o.entrypoint},
		User:       o.user,
		Env:        []string{defaultPath},
	}
	return mutate.ConfigFile(img, cfg)
}

// singleFileTar is a layer holding one executable at the root, mode 0755,
// owned by root, with a fixed time.
func singleFileTar(base string, data []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     base,
		Mode:     0o755,
		Size:     int64(len(data)),
		ModTime:  mtime,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeOCIArchive writes img as an OCI image layout in a scratch directory
// and packs that directory into a tar at out, in a fixed order with fixed
// times and owners, so the archive's bytes depend on the image alone.
func writeOCIArchive(out string, ref name.Tag, img v1.Image) error {
	dir, err := os.MkdirTemp("", "evictd-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationContainerdName: containerdName(ref),
		annotationRefName:        ref.TagStr(),
	})); err != nil {
		return err
	}
	return writeAtomically(out, func(w io.Writer) error {
		tw := tar.NewWriter(w)
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0)}
			if d.IsDir() {
				hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
				return tw.WriteHeader(hdr)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(data))
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		})
		if err != nil {
			return err
		}
		return tw.Close()
	})
}

// containerdName is the reference as containerd and the kubelet spell it:
// evictd:dev is docker.io/library/evictd:dev.
func containerdName(ref name.Tag) string {
	registry := ref.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	return registry + "/" + ref.RepositoryStr() + ":" + ref.TagStr()
}

// writeAtomically writes a file beside out and renames it into place, so an
// interrupted build never leaves a partial archive under the final name.
func writeAtomically(out string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}

// checkBinary makes sure p is a statically linked Linux executable, since
// the image has nothing else, and returns its GOARCH ("" for a machine
// elfArch does not know).
func checkBinary(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("%s is not a Linux executable: %w", p, err)
	}
	defer f.Close()
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return "", fmt.Errorf("%s is not a Linux executable (ELF OS ABI %v)", p, f.OSABI)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("%s is not an executable (ELF type %v)", p, f.Type)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked, and the image has no C library: build it with CGO_ENABLED=0", p)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return "", fmt.Errorf("%s needs shared libraries %v, and the image has none: build it with CGO_ENABLED=0", p, libs)
	}
	return elfArch(f), nil
}

// elfArch is the GOARCH that produces f's machine, or "".
func elfArch(f *elf.File) string {
	le := f.ByteOrder == binary.LittleEndian
	is64 := f.Class == elf.ELFCLASS64
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_386:
		return "386"
	case elf.EM_AARCH64:
		return "arm64"
	case elf.EM_ARM:
		return "arm"
	case elf.EM_PPC64:
		if le {
			return "ppc64le"
		}
		return "ppc64"
	case elf.EM_S390:
		if is64 {
			return "s390x"
		}
	case elf.EM_RISCV:
		if is64 {
			return "riscv64"
		}
	case elf.EM_LOONGARCH:
		return "loong64"
	case elf.EM_MIPS:
		switch {
		case is64 && le:
			return "mips64le"
		case is64:
			return "mips64"
		case le:
			return "mipsle"
		default:
			return "mips"
		}
	}
	return ""
}
