// SPDX-License-Identifier: Apache-2.0

// Package kubeletcfg finds the node's kubelet eviction settings: the
// kubelet's process and flags under the host's /proc, its configuration
// file and drop-ins, kubeadm's flags file, or the kubeadm default path. It
// returns the kubelet's effective hard thresholds, as kubelet v1.37 loads
// them, and where they came from; Place then puts evictd's default
// thresholds a stated margin above them.
//
// The kubelet is the process named kubelet that runs outside the pods'
// cgroup tree (cgroup.go, process.go): a pod can start a process with any
// name. Parsing (this file, cgroup.go), the kubelet's loading steps
// (load.go) and the bound on what placement adopts (bound.go) are pure;
// reading the host is in read.go and process.go.
package kubeletcfg

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/evictd/evictd/pkg/thresholds"
)

// DefaultHard is the kubelet's default evictionHard on Linux
// (pkg/kubelet/apis/config/v1beta1/defaults_linux.go): no pid.available.
func DefaultHard() map[string]string {
	return map[string]string{
		string(thresholds.MemoryAvailable):   "100Mi",
		string(thresholds.NodeFsAvailable):   "10%",
		string(thresholds.NodeFsInodesFree):  "5%",
		string(thresholds.ImageFsAvailable):  "15%",
		string(thresholds.ImageFsInodesFree): "5%",
	}
}

// The kubelet's image garbage collection defaults
// (pkg/kubelet/apis/config/v1beta1/defaults.go): its periodic collection
// starts once the image filesystem is DefaultImageGCHigh % used and frees
// down to DefaultImageGCLow %; 100 switches the collection off.
const (
	DefaultImageGCHigh = 85
	DefaultImageGCLow  = 80
)

// The kubelet's flag names this package reads; every other flag is
// skipped.
const (
	flagConfig      = "config"
	flagConfigDir   = "config-dir"
	flagHard        = "eviction-hard"
	flagSoft        = "eviction-soft"
	flagSoftGrace   = "eviction-soft-grace-period"
	flagMinReclaim  = "eviction-minimum-reclaim"
	flagImageGCHigh = "image-gc-high-threshold"
	flagImageGCLow  = "image-gc-low-threshold"
	flagEnforce     = "enforce-node-allocatable"
	flagIgnoreEvict = "experimental-allocatable-ignore-eviction"
)

// Args is what a kubelet command line says about eviction. A map is nil
// when its flag is absent, so that "not given" and "given empty" differ (an
// empty --eviction-hard= still replaces the file's map, as in the kubelet).
type Args struct {
	Config, ConfigDir string
	Hard, Soft        map[string]string
	SoftGrace         map[string]string
	MinReclaim        map[string]string
	// ImageGCHigh and ImageGCLow are --image-gc-high-threshold and
	// --image-gc-low-threshold; nil when absent.
	ImageGCHigh, ImageGCLow *int32
	// EnforceNodeAllocatable is --enforce-node-allocatable; nil when
	// absent.
	EnforceNodeAllocatable []string
	// AllocatableIgnoresEviction is the deprecated
	// --experimental-allocatable-ignore-eviction: the kubelet then gives
	// allocatableMemory.available no copy of memory.available.
	AllocatableIgnoresEviction bool
}

// SplitCmdline splits /proc/PID/cmdline, whose arguments each end in a NUL.
func SplitCmdline(data []byte) []string {
	data = bytes.TrimSuffix(data, []byte{0})
	if len(data) == 0 {
		return nil
	}
	return strings.Split(string(data), "\x00")
}

// IsKubelet reports whether argv is a kubelet's: argv[0]'s base name is
// "kubelet" (a wrapper such as "hyperkube kubelet" is not recognised).
func IsKubelet(argv []string) bool {
	return len(argv) > 0 && path.Base(argv[0]) == "kubelet"
}

// ParseArgs reads the eviction flags of a kubelet's arguments (argv[0]
// excluded) as the kubelet's pflag set does: --name=value or --name value,
// "_" in a name read as "-" (its WordSepNormalizeFunc), nothing after "--".
// A single dash starts one-letter flags, so the kubelet refuses
// "-config=..." (unknown shorthand): so does ParseArgs, naming it. A map flag
// may be repeated, its entries adding up, and a signal named twice keeps
// its last value, as the kubelet's map flags do; the last --config wins.
func ParseArgs(args []string) (Args, error) {
	var a Args
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			continue
		}
		single := !strings.HasPrefix(arg, "--")
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		name = strings.ReplaceAll(name, "_", "-")
		var dst *map[string]string
		sep := "="
		switch name {
		case flagConfig, flagConfigDir, flagImageGCHigh, flagImageGCLow, flagEnforce:
		case flagIgnoreEvict:
			// A bool flag: its value only after "=".
			if single {
				return Args{}, fmt.Errorf("%s: the kubelet reads a single dash as one-letter flags and refuses it (unknown shorthand flag %q); write --%s", arg, name[:1], name)
			}
			v := true
			if hasValue {
				b, err := strconv.ParseBool(value)
				if err != nil {
					return Args{}, fmt.Errorf("--%s=%s: want true or false", name, value)
				}
				v = b
			}
			a.AllocatableIgnoresEviction = v
			continue
		case flagHard:
			dst, sep = &a.Hard, "<"
		case flagSoft:
			dst, sep = &a.Soft, "<"
		case flagSoftGrace:
			dst = &a.SoftGrace
		case flagMinReclaim:
			dst = &a.MinReclaim
		default:
			continue
		}
		if single {
			return Args{}, fmt.Errorf("%s: the kubelet reads a single dash as one-letter flags and refuses it (unknown shorthand flag %q); write --%s", arg, name[:1], name)
		}
		if !hasValue {
			if i+1 >= len(args) {
				return Args{}, fmt.Errorf("flag --%s has no value", name)
			}
			i++
			value = args[i]
		}
		switch name {
		case flagConfig:
			a.Config = value
			continue
		case flagConfigDir:
			a.ConfigDir = value
			continue
		case flagEnforce:
			// pflag's string slice: its first value replaces the
			// default, later ones add to it.
			if a.EnforceNodeAllocatable == nil {
				a.EnforceNodeAllocatable = []string{}
			}
			if value != "" {
				a.EnforceNodeAllocatable = append(a.EnforceNodeAllocatable, strings.Split(value, ",")...)
			}
			continue
		case flagImageGCHigh, flagImageGCLow:
			pct, err := parseInt32(value)
			if err != nil {
				return Args{}, fmt.Errorf("--%s=%s: %w", name, value, err)
			}
			if name == flagImageGCHigh {
				a.ImageGCHigh = &pct
			} else {
				a.ImageGCLow = &pct
			}
			continue
		}
		if *dst == nil {
			// The kubelet's map flags clear the map at their first
			// value: a flag replaces what the file said.
			*dst = map[string]string{}
		}
		if err := setMapFlag(*dst, value, sep); err != nil {
			return Args{}, fmt.Errorf("--%s=%s: %w", name, value, err)
		}
	}
	return a, nil
}

// setMapFlag is component-base's MapStringString and
// LangleSeparatedMapStringString Set: comma-separated pairs, an empty one
// skipped, key and value trimmed, a later key replacing an earlier one.
func setMapFlag(m map[string]string, value, sep string) error {
	for _, s := range strings.Split(value, ",") {
		if len(s) == 0 {
			continue
		}
		k, v, ok := strings.Cut(s, sep)
		if !ok {
			return fmt.Errorf("%q is not SIGNAL%sVALUE", s, sep)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return nil
}

// ParseKubeadmEnv reads kubeadm's /var/lib/kubelet/kubeadm-flags.env, one
// line KUBELET_KUBEADM_ARGS="--flag=value ...", into the kubelet arguments
// it holds. Other lines and comments are ignored.
func ParseKubeadmEnv(data []byte) ([]string, error) {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		v, ok := strings.CutPrefix(line, "KUBELET_KUBEADM_ARGS=")
		if !ok {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
			if v[len(v)-1] != v[0] {
				return nil, fmt.Errorf("KUBELET_KUBEADM_ARGS=%s: unterminated quote", v)
			}
			v = v[1 : len(v)-1]
		}
		return strings.Fields(v), nil
	}
	return nil, errors.New("no KUBELET_KUBEADM_ARGS= line")
}

// ParseHard turns the kubelet's effective hard map into thresholds by
// signal. Signals evictd does not watch (containerfs.*, which the kubelet
// itself overrides with the nodefs or imagefs ones) are returned in
// ignored; "0%" and "100%" mean no threshold, as in the kubelet.
// allocatableMemory.available follows memory.available, as the kubelet's
// addAllocatableThresholds does for a node that enforces allocatable for
// pods (the default): ParseHardFor says when it does not.
func ParseHard(hard map[string]string) (map[thresholds.Signal]thresholds.Value, []string, error) {
	return ParseHardFor(hard, true)
}

// ParseHardFor is ParseHard for a kubelet that copies memory.available to
// allocatableMemory.available (allocatable) or not. The kubelet adds the
// copy beside an allocatableMemory.available it is given, and the higher
// of the two acts first: that one is kept (a quantity and a percentage,
// which cannot be compared without the capacity, keep the one named).
func ParseHardFor(hard map[string]string, allocatable bool) (map[thresholds.Signal]thresholds.Value, []string, error) {
	known := map[string]string{}
	var ignored []string
	for k, v := range hard {
		s, err := thresholds.ParseSignal(k)
		if err != nil || s.Stall() || s.MemoryHigh() || s == thresholds.SwapAvailable {
			ignored = append(ignored, k)
			continue
		}
		known[k] = v
	}
	mem, alloc := string(thresholds.MemoryAvailable), string(thresholds.AllocatableMemoryAvailable)
	_, named := known[alloc]
	if v, ok := known[mem]; ok && allocatable && !named {
		known[alloc] = v
	}
	ths, err := thresholds.Parse(thresholds.Spec{Hard: known})
	if err != nil {
		return nil, ignored, err
	}
	out := make(map[thresholds.Signal]thresholds.Value, len(ths))
	for _, th := range ths {
		out[th.Signal] = th.Value
	}
	m, okM := out[thresholds.MemoryAvailable]
	a, okA := out[thresholds.AllocatableMemoryAvailable]
	if allocatable && named && okM && okA && higher(m, a) {
		out[thresholds.AllocatableMemoryAvailable] = m
	}
	return out, ignored, nil
}

// higher reports whether v is a threshold above w of the same kind.
func higher(v, w thresholds.Value) bool {
	switch {
	case v.Quantity != nil && w.Quantity != nil:
		return v.Quantity.Cmp(*w.Quantity) > 0
	case v.Quantity == nil && w.Quantity == nil:
		return v.Percentage > w.Percentage
	}
	return false
}

// ImageGC is the kubelet's image garbage collection thresholds, in percent
// of the image filesystem used.
type ImageGC struct {
	High, Low int32
}

// Off reports whether the kubelet collects no images: a high threshold of
// 100 switches its collection off (kubelet's help text).
func (g ImageGC) Off() bool { return g.High >= 100 }

// FreeShare is the share of the image filesystem available when the
// periodic collection starts: 0.15 for the default 85 %; 0 when it is off.
func (g ImageGC) FreeShare() float64 {
	if g.Off() {
		return 0
	}
	return float64(100-g.High) / 100
}

// parseInt32 reads a kubelet int32 flag's value as pflag does: base
// prefixes (0x, 0o, 0b, a leading 0) taken.
func parseInt32(v string) (int32, error) {
	n, err := strconv.ParseInt(v, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("want a whole percentage, not %q", v)
	}
	return int32(n), nil
}
