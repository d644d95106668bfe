// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// repoVersion is the VERSION file: the one place the release's version is set.
func repoVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	// SemVer 2.0 without a leading v: what Helm takes as a chart version.
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`).MatchString(v) {
		t.Fatalf("VERSION %q is not a SemVer version such as 0.1.0", v)
	}
	return v
}

// TestReleaseVersionsAgree: the chart's version and appVersion and its
// Artifact Hub image are VERSION, and the CHANGELOG agrees with it
// (checkChangelog).
func TestReleaseVersionsAgree(t *testing.T) {
	v := repoVersion(t)
	raw, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Version, AppVersion string
		Sources             []string
		Maintainers         []map[string]string
		Annotations         map[string]string
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != v || meta.AppVersion != v {
		t.Errorf("Chart.yaml version %q, appVersion %q; VERSION is %s: set both to it", meta.Version, meta.AppVersion, v)
	}
	if len(meta.Sources) == 0 || len(meta.Maintainers) == 0 || meta.Maintainers[0]["name"] == "" {
		t.Errorf("Chart.yaml sources %v, maintainers %v: want both", meta.Sources, meta.Maintainers)
	}
	var images []struct{ Name, Image string }
	if err := yaml.Unmarshal([]byte(meta.Annotations["artifacthub.io/images"]), &images); err != nil {
		t.Fatalf("artifacthub.io/images: %v", err)
	}
	vals, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct{ Image struct{ Repository string } }
	if err := yaml.Unmarshal(vals, &values); err != nil {
		t.Fatal(err)
	}
	if want := values.Image.Repository + ":" + v; len(images) != 1 || images[0].Image != want {
		t.Errorf("artifacthub.io/images %+v; want one image %s (image.repository and the appVersion)", images, want)
	}
	changelog, err := os.ReadFile(repoPath(t, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkChangelog(v, string(changelog)); err != nil {
		t.Error(err)
	}
}

// releasedRE finds CHANGELOG.md's newest release entry, "## [VERSION] - DATE".
var releasedRE = regexp.MustCompile(`(?m)^## \[([^\]]+)\] - \d{4}-\d{2}-\d{2}$`)

// checkChangelog holds VERSION to CHANGELOG.md. A release is VERSION
// without a prerelease suffix, with a dated entry "## [VERSION] - DATE" as
// the newest. Between releases VERSION is the next one's "-dev"
// prerelease: above the newest release, with what it holds so far under
// "## [Unreleased]".
func checkChangelog(version, changelog string) error {
	newest := releasedRE.FindStringSubmatch(changelog)
	unreleased := regexp.MustCompile(`(?ms)^## \[Unreleased\]\n(.*?)(^## |\z)`).FindStringSubmatch(changelog)
	if unreleased == nil {
		return fmt.Errorf("CHANGELOG.md has no \"## [Unreleased]\" section")
	}
	dev, isDev := strings.CutSuffix(version, "-dev")
	if !isDev {
		if newest == nil || newest[1] != version {
			return fmt.Errorf("VERSION %s is a release, and CHANGELOG.md's newest release is %q: add \"## [%s] - YYYY-MM-DD\" (or make VERSION a -dev version)", version, newest, version)
		}
		return nil
	}
	if newest == nil {
		return nil // nothing released yet
	}
	next, err := semver.StrictNewVersion(dev)
	if err != nil {
		return fmt.Errorf("VERSION %s: %v", version, err)
	}
	last, err := semver.StrictNewVersion(newest[1])
	if err != nil {
		return fmt.Errorf("CHANGELOG.md's newest release %q: %v", newest[1], err)
	}
	if !next.GreaterThan(last) {
		return fmt.Errorf("VERSION %s is not above CHANGELOG.md's newest release %s: a -dev VERSION names the next release", version, last)
	}
	if !regexp.MustCompile(`(?m)^- `).MatchString(unreleased[1]) {
		return fmt.Errorf("VERSION %s is unreleased and CHANGELOG.md's [Unreleased] section lists no change", version)
	}
	return nil
}

// TestChangelogRule: checkChangelog's rule on made-up changelogs, each
// case one way a VERSION and a CHANGELOG disagree.
func TestChangelogRule(t *testing.T) {
	const released = "## [0.1.0] - 2026-11-25\n\n- first\n"
	for _, c := range []struct {
		version, changelog, err string
	}{
		{"0.2.0-dev", "## [Unreleased]\n\n- a change\n\n" + released, ""},
		{"0.1.0", "## [Unreleased]\n\n" + released, ""},
		{"0.1.0-dev", "## [Unreleased]\n\n- a change\n\n" + released, "not above"},
		{"0.2.0-dev", "## [Unreleased]\n\n" + released, "lists no change"},
		{"0.2.0", "## [Unreleased]\n\n- a change\n\n" + released, "is a release"},
		{"0.2.0-dev", released, "no \"## [Unreleased]\""},
	} {
		err := checkChangelog(c.version, c.changelog)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("VERSION %s with\n%s\ngave %v; want an error with %q", c.version, c.changelog, err, c.err)
		}
	}
}

// TestRelease runs `make release` into a temporary directory and checks what
// it wrote: an OCI archive of evictd for amd64 and arm64 with the version's
// labels, the packaged chart at VERSION, an SBOM that lists every module
// `go version -m` reads from each binary, and SHA256SUMS of the three.
func TestRelease(t *testing.T) {
	v := repoVersion(t)
	root := repoPath(t)
	dir := t.TempDir()
	start := time.Now()
	cmd := exec.Command("make", "release", "RELEASE_DIR="+dir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-trimpath")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	t.Logf("make release took %s", time.Since(start).Round(100*time.Millisecond))

	want := []string{"evictd-" + v + "-image.tar", "evictd-" + v + ".tgz", "evictd-" + v + ".spdx.json"}
	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	for _, f := range want {
		if got := fileSum(t, filepath.Join(dir, f)); sums[f] != got {
			t.Errorf("SHA256SUMS says %s is %q; it is %s", f, sums[f], got)
		}
	}
	if len(sums) != len(want) {
		t.Errorf("SHA256SUMS lists %d files; want %d", len(sums), len(want))
	}

	revision := strings.TrimSpace(run(t, root, "git", "rev-parse", "HEAD"))
	checkImage(t, filepath.Join(dir, want[0]), v, revision)
	checkChartPackage(t, filepath.Join(dir, want[1]), v)

	var sbom struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name, VersionInfo string
			Checksums         []struct{ ChecksumValue string }
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, want[2]))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &sbom); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	binaries := map[string]bool{}
	for _, p := range sbom.Packages {
		listed[p.Name+" "+p.VersionInfo] = true
		for _, c := range p.Checksums {
			binaries[c.ChecksumValue] = true
		}
	}
	if sbom.SPDXVersion != "SPDX-2.3" {
		t.Errorf("SBOM spdxVersion %q", sbom.SPDXVersion)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(root, "_output", "linux-"+arch, "evictd")
		if !binaries[fileSum(t, bin)] {
			t.Errorf("the SBOM has no package with the checksum of %s", bin)
		}
		mods := goModules(t, bin)
		if len(mods) < 20 {
			t.Fatalf("go version -m %s lists %d modules; evictd links far more", bin, len(mods))
		}
		for _, m := range mods {
			if !listed[m] {
				t.Errorf("the SBOM does not list %s (linked into %s)", m, bin)
			}
		}
	}

	// The binary says the version too (the one this machine can run).
	out := run(t, root, filepath.Join(root, "_output", "linux-"+runtime.GOARCH, "evictd"), "--version")
	if !strings.Contains(out, v) || !strings.Contains(out, revision) {
		t.Errorf("evictd --version says %q; want %s and %s", out, v, revision)
	}
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// goModules is what `go version -m` reads from bin: the Go version as
// "stdlib goX", and each dep as "path version", a replacement's own.
func goModules(t *testing.T, bin string) []string {
	t.Helper()
	var mods []string
	sc := bufio.NewScanner(strings.NewReader(run(t, ".", "go", "version", "-m", bin)))
	first := true
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case first:
			first = false
			mods = append(mods, "stdlib "+f[len(f)-1])
		case len(f) >= 3 && f[0] == "dep":
			mods = append(mods, f[1]+" "+f[2])
		case len(f) >= 3 && f[0] == "=>":
			mods[len(mods)-1] = f[1] + " " + f[2]
		}
	}
	return mods
}

func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		sums[f[1]] = f[0]
	}
	return sums
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tarFiles reads every regular file of a tar (gzipped when gz).
func tarFiles(t *testing.T, path string, gz bool) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = b
		}
	}
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

// checkImage reads the OCI layout in the archive by hand (index.json, the
// image index, each platform's manifest and config): one image per
// architecture, each labelled with the version and the revision.
func checkImage(t *testing.T, path, version, revision string) {
	t.Helper()
	files := tarFiles(t, path, false)
	blob := func(digest string, into any) {
		t.Helper()
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			t.Fatalf("%s: no blob %s", path, digest)
		}
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("blob %s: %v", digest, err)
		}
	}
	var top struct{ Manifests []ociDescriptor }
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatalf("%s: index.json: %v", path, err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("index.json %+v; want one image index tagged %s", top.Manifests, version)
	}
	var index struct{ Manifests []ociDescriptor }
	blob(top.Manifests[0].Digest, &index)
	arches := map[string]bool{}
	for _, m := range index.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Errorf("manifest %s: platform %+v", m.Digest, m.Platform)
			continue
		}
		var manifest struct{ Config ociDescriptor }
		blob(m.Digest, &manifest)
		var cfg struct {
			Architecture string
			Config       struct{ Labels map[string]string }
		}
		blob(manifest.Config.Digest, &cfg)
		arches[cfg.Architecture] = true
		l := cfg.Config.Labels
		for k, want := range map[string]string{
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": revision,
			"org.opencontainers.image.source":   "https://github.com/evictd/evictd",
			"org.opencontainers.image.licenses": "Apache-2.0",
		} {
			if l[k] != want {
				t.Errorf("%s image: label %s = %q; want %q", cfg.Architecture, k, l[k], want)
			}
		}
		if _, err := time.Parse(time.RFC3339, l["org.opencontainers.image.created"]); err != nil {
			t.Errorf("%s image: label org.opencontainers.image.created %q: %v", cfg.Architecture, l["org.opencontainers.image.created"], err)
		}
	}
	if !arches["amd64"] || !arches["arm64"] || len(arches) != 2 {
		t.Errorf("the archive's images are for %v; want amd64 and arm64", keys(arches))
	}
}

// checkChartPackage: the packaged chart is the chart at VERSION.
func checkChartPackage(t *testing.T, path, version string) {
	t.Helper()
	files := tarFiles(t, path, true)
	var meta struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(files["evictd/Chart.yaml"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != version || meta.AppVersion != version {
		t.Errorf("%s: Chart.yaml version %q appVersion %q; want %s", path, meta.Version, meta.AppVersion, version)
	}
	for _, f := range []string{"evictd/values.yaml", "evictd/values.schema.json", "evictd/templates/daemonset.yaml"} {
		if _, ok := files[f]; !ok {
			t.Errorf("%s holds no %s", path, f)
		}
	}
}
