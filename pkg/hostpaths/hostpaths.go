// SPDX-License-Identifier: Apache-2.0

// Package hostpaths checks, once at start, the host directories evictd can
// run without: the kubelet's pods directory, the pods' logs and the
// runtime's stores. A DaemonSet mounts them with an unchecked hostPath type
// so that a distribution keeping them elsewhere does not stop the pod; the
// runtime then mounts an empty directory it made, and every read of it
// succeeds with nothing in it. This check turns that silence into a
// warning that names the path and what evictd cannot measure without it.
package hostpaths

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Problem is one host directory that is missing or empty.
type Problem struct {
	// Path is the host path, as evictd names it (without the host root).
	Path string
	// Missing is true when the directory does not exist (or is not a
	// directory), false when it exists with nothing in it.
	Missing bool
	// Loses says what evictd cannot measure without it.
	Loses string
	// Hint names the setting that points evictd at the right place.
	Hint string
}

// What each path serves, and how to point evictd at the right one.
const (
	losesPods   = "pods' emptyDir and writable-layer usage (ephemeral storage), and nodefs is measured on whatever filesystem holds this directory"
	losesLogs   = "pods' log usage and their namespace/name before the API server tells"
	losesImage  = "imagefs is measured on whatever filesystem holds this directory, and the writable layers under it are not found"
	hintKubelet = "the kubelet's root directory (chart value hostPaths.kubeletRoot) must be mounted at var/lib/kubelet under the host root"
	hintLogs    = "the pod log directory (hostPaths.podLogs) must be mounted at var/log/pods under the host root"
	hintImage   = "--image-fs (hostPaths.imageStore) must name the runtime's root directory, mounted at that path under the host root"
	hintCtr     = "--container-fs (hostPaths.containerStore) must name the runtime's writable-layer store, mounted at that path under the host root"
)

// Check looks at the directories under hostRoot and returns one Problem for
// each that is missing or empty, in a fixed order. containerFs is skipped
// when empty or equal to imageFs.
func Check(hostRoot, imageFs, containerFs string) []Problem {
	type dir struct{ path, loses, hint string }
	dirs := []dir{
		{"/var/lib/kubelet/pods", losesPods, hintKubelet},
		{"/var/log/pods", losesLogs, hintLogs},
		{imageFs, losesImage, hintImage},
	}
	if containerFs != "" && filepath.Clean(containerFs) != filepath.Clean(imageFs) {
		dirs = append(dirs, dir{containerFs, losesImage, hintCtr})
	}
	var out []Problem
	for _, d := range dirs {
		missing, empty := inspect(filepath.Join(hostRoot, d.path))
		if missing || empty {
			out = append(out, Problem{Path: filepath.Clean(d.path), Missing: missing, Loses: d.loses, Hint: d.hint})
		}
	}
	return out
}

// inspect reports whether dir is missing (or no directory) or empty. A
// directory that cannot be listed is neither: its reads will fail, and
// evictd reports those where they happen.
func inspect(dir string) (missing, empty bool) {
	f, err := os.Open(dir)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist), false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, false
	}
	if !st.IsDir() {
		return true, false
	}
	names, err := f.Readdirnames(1)
	return false, len(names) == 0 && err != nil
}
