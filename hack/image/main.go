// SPDX-License-Identifier: Apache-2.0

// Command image writes a container image that holds one static executable,
// without a Docker engine. It is what `make image`, `make image-push` and
// `make image-workload` run:
//
//	image --binary _output/linux-amd64/evictd --binary _output/linux-arm64/evictd \
//	  --name evictd:v1.2.3 --label org.opencontainers.image.revision=<commit> --out evictd.tar
//
// Each image has one layer, the executable at /<its base name>, mode 0755,
// owned by 0:0, and a config with that entrypoint, the user 65532:65532
// (distroless's nonroot; the DaemonSet overrides it with runAsUser 0) and the
// --label labels. There is no base image: evictd is static and reads no file
// of a base's (no /etc/passwd, CA bundle or tzdata is needed; the user is
// numeric). Several --binary, one per architecture (read from each ELF
// header), make an OCI image index of one image per platform.
//
// The output is reproducible: the same executables, name, labels and
// creation time give the same bytes and the same digest. The creation time
// is $SOURCE_DATE_EPOCH, or the Unix epoch.
//
// Formats, or --push to the registry --name names (credentials from the
// Docker config, as docker login leaves them):
//
//   - oci-layout (default): an OCI image layout (oci-layout, index.json,
//     blobs/sha256/...) packed as a tar, with OCI media types. Its index.json
//     names the image (or the index) with io.containerd.image.name (the full
//     reference, docker.io/library/evictd:dev) and
//     org.opencontainers.image.ref.name (the tag), as BuildKit's OCI exporter
//     does, so `ctr -n k8s.io images import` stores it under the name the
//     kubelet looks up, and skopeo, podman and crane read it as oci-archive.
//   - docker-archive: the `docker save` format (manifest.json with RepoTags),
//     for `docker load`, of one platform; containerd's import reads it too.
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
	"maps"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	formatOCI    = "oci-layout"
	formatDocker = "docker-archive"

	// defaultUser is distroless's nonroot.
	defaultUser = "65532:65532"
	// defaultPath is the PATH Docker and distroless set.
	defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

	// Annotations of an image in index.json, as BuildKit writes them.
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

type options struct {
	binaries   []string // one image per binary: an index when several
	name       string
	entrypoint string
	user       string
	arch       string
	labels     map[string]string
	out        string
	push       bool
	format     string
	created    time.Time
}

// result is what a build wrote.
type result struct {
	ref      name.Tag
	platform string // "linux/amd64", or "linux/amd64,linux/arm64" for an index
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
	where := o.out
	if o.push {
		where = "registry"
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %s, %s)\n", where, o.format, res.ref, res.platform)
	// A docker-archive holds no manifest (docker load and containerd's
	// import make their own), so only the OCI archive's digest is the one
	// the runtime will show.
	if o.format == formatOCI {
		fmt.Fprintf(stdout, "digest:   %s\n", res.digest)
	}
	if len(o.binaries) == 1 {
		fmt.Fprintf(stdout, "image ID: %s\n", res.imageID)
	}
	return 0
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Func("binary", "a static Linux executable to put in the image (required; repeat it for an image of several platforms, one executable each, written as an OCI image index)", func(v string) error {
		o.binaries = append(o.binaries, v)
		return nil
	})
	o.labels = map[string]string{}
	fs.Func("label", "a KEY=VALUE label of the image's config (repeatable), e.g. org.opencontainers.image.revision=<commit>", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, not %q", v)
		}
		o.labels[k] = val
		return nil
	})
	fs.BoolVar(&o.push, "push", false, "push the image to the registry --name names (credentials from the Docker config, as docker login leaves them) instead of writing --out")
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
	if len(o.binaries) == 0 {
		return o, errors.New("--binary is required")
	}
	if o.name == "" {
		return o, errors.New("--name is required")
	}
	switch {
	case o.push && o.out != "":
		return o, errors.New("--out and --push: write an archive or push, not both")
	case !o.push && o.out == "":
		return o, errors.New("--out is required (or --push)")
	}
	if o.format != formatOCI && o.format != formatDocker {
		return o, fmt.Errorf("--format %q: want %s or %s", o.format, formatOCI, formatDocker)
	}
	if len(o.binaries) > 1 && o.format == formatDocker {
		return o, fmt.Errorf("--format %s holds one platform; %d --binary given (use %s)", formatDocker, len(o.binaries), formatOCI)
	}
	if len(o.binaries) > 1 && o.arch != "" {
		return o, errors.New("--arch names the platform of one --binary; with several, each one's ELF header says")
	}
	base := filepath.Base(o.binaries[0])
	for _, b := range o.binaries[1:] {
		if filepath.Base(b) != base {
			return o, fmt.Errorf("--binary %s and %s: the executables of one image share a name (it is the entrypoint)", o.binaries[0], b)
		}
	}
	if o.entrypoint == "" {
		o.entrypoint = "/" + base
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
	var images []v1.Image
	var platforms []string
	for _, bin := range o.binaries {
		img, arch, err := imageOf(o, bin)
		if err != nil {
			return res, err
		}
		for i, p := range platforms {
			if p == "linux/"+arch {
				return res, fmt.Errorf("--binary %s and %s are both for %s", o.binaries[i], bin, p)
			}
		}
		images = append(images, img)
		platforms = append(platforms, "linux/"+arch)
	}
	res.platform = strings.Join(platforms, ",")
	if res.imageID, err = images[0].ConfigName(); err != nil {
		return res, err
	}
	var idx v1.ImageIndex
	if len(images) == 1 {
		res.digest, err = images[0].Digest()
	} else {
		idx, err = indexOf(images)
		if err == nil {
			res.digest, err = idx.Digest()
		}
	}
	if err != nil {
		return res, err
	}
	if o.push {
		return res, push(ref, images[0], idx)
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return res, err
	}
	switch o.format {
	case formatDocker:
		err = writeAtomically(o.out, func(w io.Writer) error { return tarball.Write(ref, images[0], w) })
	default:
		err = writeOCIArchive(o.out, ref, images[0], idx)
	}
	return res, err
}

// imageOf checks one executable and builds its image; it returns the
// image's architecture too.
func imageOf(o options, bin string) (v1.Image, string, error) {
	arch, err := checkBinary(bin)
	if err != nil {
		return nil, "", err
	}
	switch {
	case arch == "" && o.arch == "":
		return nil, "", fmt.Errorf("%s: unknown ELF machine; name the architecture with --arch", bin)
	case arch == "":
		arch = o.arch
	case o.arch != "" && o.arch != arch:
		return nil, "", fmt.Errorf("--arch %s, but %s is built for %s", o.arch, bin, arch)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, "", err
	}
	img, err := image(o, bin, arch, exe)
	return img, arch, err
}

// indexOf is an OCI image index of the images, each with its platform.
func indexOf(images []v1.Image) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture},
		}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// push writes the image, or the index when there is one, to the registry
// ref names, with the credentials docker login (or crane auth login) left in
// the Docker config.
func push(ref name.Tag, img v1.Image, idx v1.ImageIndex) error {
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	if idx != nil {
		return remote.WriteIndex(ref, idx, auth)
	}
	return remote.Write(ref, img, auth)
}

// image builds the image: one layer with exe at /<base name>, and the config.
func image(o options, bin, arch string, exe []byte) (v1.Image, error) {
	base := filepath.Base(bin)
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
	if len(o.labels) > 0 {
		cfg.Config.Labels = maps.Clone(o.labels)
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
func writeOCIArchive(out string, ref name.Tag, img v1.Image, idx v1.ImageIndex) error {
	dir, err := os.MkdirTemp("", "evictd-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	ann := layout.WithAnnotations(map[string]string{
		annotationContainerdName: containerdName(ref),
		annotationRefName:        ref.TagStr(),
	})
	if idx != nil {
		err = lp.AppendIndex(idx, ann)
	} else {
		err = lp.AppendImage(img, ann)
	}
	if err != nil {
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
