// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment overrides for where things are found.
const (
	// BinDirEnv names a directory holding the built binaries (etcd,
	// kube-apiserver, kube-controller-manager, workload, evictd). Default:
	// <repo>/_output/bin.
	BinDirEnv = "EVICTD_BIN_DIR"
	// KubeBinDirEnv names a directory holding only the Kubernetes binaries
	// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the
	// VM node's kubelet), built at another release than hack/cluster pins
	// (hack/build-cluster-version.sh, make e2e-node-smoke KUBE_VERSION=...),
	// while evictd and the test binaries still come from BinDir. Default:
	// BinDir().
	KubeBinDirEnv = "EVICTD_KUBE_BIN_DIR"
	// RepoRootEnv names the repository root. Default: the nearest directory
	// above the working directory whose go.mod declares the evictd module.
	RepoRootEnv = "EVICTD_REPO_ROOT"
)

const modulePath = "github.com/evictd/evictd"

// The control plane binaries, built by `make cluster-bins`.
var controlPlaneBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// ErrMissingBinary is wrapped by Binary when a binary has not been built.
var ErrMissingBinary = errors.New("run make build cluster-bins")

// RepoRoot finds the repository root (see RepoRootEnv).
func RepoRoot() (string, error) {
	if d := os.Getenv(RepoRootEnv); d != "" {
		return filepath.Abs(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if mod, err := moduleOf(filepath.Join(dir, "go.mod")); err == nil && mod == modulePath {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("no go.mod of module %s above %s (set %s)", modulePath, wd, RepoRootEnv)
		}
	}
}

func moduleOf(goMod string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", goMod)
}

// BinDir is where built binaries are looked up (see BinDirEnv).
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return filepath.Abs(d)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "bin"), nil
}

// KubeBinDir is where the Kubernetes binaries are looked up (see
// KubeBinDirEnv).
func KubeBinDir() (string, error) {
	if d := os.Getenv(KubeBinDirEnv); d != "" {
		return filepath.Abs(d)
	}
	return BinDir()
}

// Binary returns the path of a built binary, or an error wrapping
// ErrMissingBinary that names the path.
func Binary(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	st, err := os.Stat(p)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no executable %s: %w", p, ErrMissingBinary)
	}
	return p, nil
}

// ManifestPath is deploy/daemonset.yaml in the repository.
func ManifestPath() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy", "daemonset.yaml"), nil
}
