// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// ErrNoKubepods is returned (wrapped) by Observe when there is no kubepods
// cgroup under the cgroup root: without it the observer cannot tell the
// pods' usage, so it gives no observation at all rather than one with no
// pods. The error names where the observer looked. Observe keeps looking on
// every call: the kubelet may create its cgroups after evictd starts.
var ErrNoKubepods = errors.New("no kubepods cgroup")

// SignalError says that a node-level eviction signal could not be measured
// in an observation because a file it needs was unreadable or malformed.
// The signal is then absent from the Summary: never a guessed or zero value.
type SignalError struct {
	// Signal is the kubelet's name of the lost signal, e.g. "memory.available".
	Signal string
	// Path is the file (or, for a filesystem signal, the path measured with
	// statfs) that failed, as seen from the host root: "/proc/loadavg" whatever
	// the host root.
	Path string
	// Err is the cause: the read error, or what is malformed in the content.
	Err error
}

func (e SignalError) Error() string {
	return fmt.Sprintf("signal %s unknown: %s: %v", e.Signal, e.Path, e.Err)
}

// Unwrap returns the cause.
func (e SignalError) Unwrap() error { return e.Err }

// MarshalJSON writes the cause as its message: {"signal", "path", "error"}.
func (e SignalError) MarshalJSON() ([]byte, error) {
	var msg string
	if e.Err != nil {
		msg = e.Err.Error()
	}
	return json.Marshal(struct {
		Signal string `json:"signal"`
		Path   string `json:"path"`
		Error  string `json:"error"`
	}{e.Signal, e.Path, msg})
}

// signalWarnInterval is how often the same lost signal is logged again for
// the same file and cause.
const signalWarnInterval = time.Minute

type signalWarnKey struct{ signal, path, cause string }

// signalFileErr records that the node-level file at p (an on-disk path),
// which signals need, was unreadable (content nil) or malformed. The file
// counts once in SkippedFiles; each signal gets a SignalError and a warning,
// logged at most once per signalWarnInterval for the same file and cause.
func (o *Observer) signalFileErr(obs *Observation, p string, content []byte, err error, signals ...string) {
	obs.SkippedFiles++
	rel := o.hostRel(p)
	cause := err.Error()
	for _, sig := range signals {
		obs.SignalErrors = append(obs.SignalErrors, SignalError{Signal: sig, Path: rel, Err: err})
		o.node.signalLost[sig] = true
		key := signalWarnKey{sig, rel, cause}
		fields := []zap.Field{zap.String("signal", sig), zap.String("file", rel), zap.NamedError("err", err)}
		if content != nil {
			fields = append(fields, zap.String("content", quoteContent(content)))
		}
		if last, ok := o.node.signalWarned[key]; ok && obs.Time.Sub(last) < signalWarnInterval {
			o.log.Debug("node signal still unknown", fields...)
			continue
		}
		o.node.signalWarned[key] = obs.Time
		o.log.Warn("node signal unknown: a file it needs is unusable; the signal is left out", fields...)
	}
}

// signalsRecovered logs, once, each signal lost in an earlier pass that
// this pass measured, and forgets its warnings: if it breaks again, that
// is logged at once.
func (o *Observer) signalsRecovered(obs *Observation) {
	if len(o.node.signalLost) == 0 {
		return
	}
outer:
	for sig := range o.node.signalLost {
		for i := range obs.SignalErrors {
			if obs.SignalErrors[i].Signal == sig {
				continue outer
			}
		}
		delete(o.node.signalLost, sig)
		for k := range o.node.signalWarned {
			if k.signal == sig {
				delete(o.node.signalWarned, k)
			}
		}
		o.log.Info("node signal readable again", zap.String("signal", sig))
	}
}

// hostRel turns an on-disk path under the host root into the path as seen
// from the host root ("/proc/loadavg"), for messages that must make sense
// on the host whatever --host-root is.
func (o *Observer) hostRel(p string) string {
	r, err := filepath.Rel(o.opts.HostRoot, p)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return p
	}
	if r == "." {
		return "/"
	}
	return "/" + r
}

// noKubepodsErr is the error of an Observe that found no kubepods cgroup
// under the cgroup root. listErr is why the cgroup root could not be
// listed, if it could not.
func (o *Observer) noKubepodsErr(listErr error) error {
	dir := o.hostRel(o.node.rootDir)
	if listErr != nil {
		var pe *fs.PathError
		if errors.As(listErr, &pe) {
			listErr = pe.Err // its path is the on-disk one; dir names it
		}
		return fmt.Errorf("%w under --cgroup-root %q in the %s memory hierarchy: cannot list %s: %v; %s",
			ErrNoKubepods, o.opts.CgroupRoot, o.hier.mode, dir, listErr, noKubepodsConsequence)
	}
	return fmt.Errorf("%w under --cgroup-root %q in the %s memory hierarchy: looked in %s for %s (cgroupfs driver), %s or *-%s (systemd driver); %s",
		ErrNoKubepods, o.opts.CgroupRoot, o.hier.mode, dir, kubepodsCgroupfs, kubepodsSystemd, kubepodsSystemd, noKubepodsConsequence)
}

// kubepodsGoneErr is the error of an Observe during which the kubepods
// cgroup at dir (on disk) was removed.
func (o *Observer) kubepodsGoneErr(dir string) error {
	return fmt.Errorf("%w under --cgroup-root %q in the %s memory hierarchy: %s was removed during the observation (kubelet restarting?); %s",
		ErrNoKubepods, o.opts.CgroupRoot, o.hier.mode, o.hostRel(dir), noKubepodsConsequence)
}

const noKubepodsConsequence = "evictd cannot tell pods' usage and will not evict"
