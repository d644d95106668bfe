// SPDX-License-Identifier: Apache-2.0

// Command sbom writes an SPDX 2.3 JSON document of Go binaries, from what the
// toolchain recorded in each (debug/buildinfo: the main module, every module
// linked in with its version and go.sum hash, the Go version and the build
// settings). It is what `make release` runs:
//
//	sbom --name evictd --version 0.1.0 --created 2026-01-02T03:04:05Z \
//	  --out evictd-0.1.0.spdx.json _output/linux-amd64/evictd _output/linux-arm64/evictd
//
// Reading the binaries rather than go.mod lists what was linked, not what
// the module graph could reach, and needs neither the network nor a
// scanner. The document is a function of its inputs (no clock, no random
// namespace), so one release's SBOM can be made again byte for byte.
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

type options struct {
	name, version, created, out, source string
	binaries                            []string
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.name, "name", "", "the product's name, e.g. evictd")
	fs.StringVar(&o.version, "version", "", "the release's version, e.g. 0.1.0 (the main module records only (devel))")
	fs.StringVar(&o.created, "created", "", "the document's creation time, RFC 3339 (the commit's date, for a reproducible document)")
	fs.StringVar(&o.source, "source", "https://github.com/evictd/evictd", "where the main module's source is")
	fs.StringVar(&o.out, "out", "", "the file to write; empty: standard output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.binaries = fs.Args()
	switch {
	case o.name == "":
		return errors.New("--name is required")
	case o.version == "":
		return errors.New("--version is required")
	case len(o.binaries) == 0:
		return errors.New("no binary given")
	}
	created, err := time.Parse(time.RFC3339, o.created)
	if err != nil {
		return fmt.Errorf("--created %q: want an RFC 3339 time such as 2026-01-02T03:04:05Z", o.created)
	}
	doc, err := build(o, created)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // a purl's '&' stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	b := buf.Bytes()
	if o.out == "" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(o.out, b, 0o644)
}

// The SPDX 2.3 JSON fields this document uses (spdx.github.io/spdx-spec/v2.3).
type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	SPDXID           string        `json:"SPDXID"`
	Name             string        `json:"name"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	PackageFileName  string        `json:"packageFileName,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	Checksums        []checksum    `json:"checksums,omitempty"`
	LicenseConcluded string        `json:"licenseConcluded"`
	LicenseDeclared  string        `json:"licenseDeclared"`
	CopyrightText    string        `json:"copyrightText"`
	Purpose          string        `json:"primaryPackagePurpose,omitempty"`
	Comment          string        `json:"comment,omitempty"`
	ExternalRefs     []externalRef `json:"externalRefs,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes an SPDX identifier (letters, digits, '.' and '-') of parts.
func spdxID(kind string, parts ...string) string {
	return "SPDXRef-" + kind + "-" + strings.Trim(idUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-"), "-")
}

// purl is a Go module's package URL (github.com/package-url/purl-spec,
// type golang); a version's "+incompatible" is escaped.
func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + url.PathEscape(version)
}

func build(o options, created time.Time) (*document, error) {
	doc := &document{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:         o.name + "-" + o.version,
		CreationInfo: creationInfo{Created: created.UTC().Format("2006-01-02T15:04:05Z"), Creators: []string{"Tool: evictd-hack-sbom", "Organization: evictd"}},
	}
	// The namespace must be unique per document: it is derived from what the
	// document describes, so that another build (other bytes) gets another.
	ns := sha256.New()
	fmt.Fprintf(ns, "%s %s\n", o.name, o.version)
	modules := map[string]pkg{}
	links := map[string]bool{}
	for _, bin := range o.binaries {
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			return nil, fmt.Errorf("%s: no Go build information: %w", bin, err)
		}
		sum, err := fileSHA256(bin)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(ns, "%s\n", sum)
		platform := setting(bi, "GOOS") + "/" + setting(bi, "GOARCH")
		binID := spdxID("Binary", filepath.Base(bin), platform)
		doc.Packages = append(doc.Packages, pkg{
			SPDXID: binID, Name: o.name, VersionInfo: o.version, PackageFileName: filepath.Base(bin),
			DownloadLocation: o.source, Checksums: []checksum{{"SHA256", sum}},
			LicenseConcluded: noAssertion, LicenseDeclared: "Apache-2.0", CopyrightText: noAssertion, Purpose: "APPLICATION",
			Comment:      fmt.Sprintf("%s for %s, built with %s from module %s", filepath.Base(bin), platform, bi.GoVersion, bi.Main.Path),
			ExternalRefs: []externalRef{{"PACKAGE-MANAGER", "purl", purl(bi.Main.Path, o.version) + "?goos=" + setting(bi, "GOOS") + "&goarch=" + setting(bi, "GOARCH")}},
		})
		doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", binID})
		deps := append([]*debug.Module{{Path: "stdlib", Version: bi.GoVersion}}, bi.Deps...)
		for _, d := range deps {
			m := module(d)
			if _, seen := modules[m.SPDXID]; !seen {
				modules[m.SPDXID] = m
			}
			if !links[binID+m.SPDXID] {
				links[binID+m.SPDXID] = true
				doc.Relationships = append(doc.Relationships, relationship{binID, "DEPENDS_ON", m.SPDXID})
			}
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}
	doc.DocumentNamespace = fmt.Sprintf("%s/spdx/%s-%s-%s", strings.TrimSuffix(o.source, "/"), o.name, o.version, hex.EncodeToString(ns.Sum(nil))[:16])
	return doc, nil
}

// module is one linked module as an SPDX package; a replaced module is
// listed as what was linked (the replacement), with the original named.
func module(d *debug.Module) pkg {
	path, version, sum, comment := d.Path, d.Version, d.Sum, ""
	if r := d.Replace; r != nil {
		comment = "replaces " + d.Path + " " + d.Version
		if r.Version == "" {
			// A directory replacement has no version: only the original's.
			comment = "a local directory " + r.Path + " replaces " + d.Path + " " + d.Version
		} else {
			path, version, sum = r.Path, r.Version, r.Sum
		}
	}
	p := pkg{
		SPDXID: spdxID("Module", path, version), Name: path, VersionInfo: version,
		DownloadLocation: noAssertion, LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
		Purpose: "LIBRARY", ExternalRefs: []externalRef{{"PACKAGE-MANAGER", "purl", purl(path, version)}},
	}
	if path == "stdlib" {
		p.Comment = "the Go standard library and runtime"
		return p
	}
	if version != "" && !strings.HasPrefix(version, "(") {
		p.DownloadLocation = "https://proxy.golang.org/" + escapeModulePath(path) + "/@v/" + version + ".zip"
	}
	if sum != "" {
		// go.sum's h1: hash is of the module's file tree, not of one file,
		// so it is not an SPDX checksum; it is kept for whoever verifies.
		comment = strings.TrimPrefix(comment+"; go.sum "+sum, "; ")
	}
	p.Comment = comment
	return p
}

// escapeModulePath is the module proxy's case encoding: each upper-case
// letter becomes '!' and its lower case.
func escapeModulePath(path string) string {
	var b strings.Builder
	for _, r := range path {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func setting(bi *buildinfo.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return "unknown"
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
