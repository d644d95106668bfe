// SPDX-License-Identifier: Apache-2.0

// Package kubeletcfg finds the node's kubelet eviction settings: the
// kubelet's process and flags under the host's /proc, its configuration
// file and drop-ins, kubeadm's flags file, or the kubeadm default path. It
// returns the kubelet's effective hard thresholds, with the kubelet's own
// defaulting, and where they came from; Place then puts evictd's default
// thresholds a stated margin above them.
//
// Parsing (this file) is pure; reading the host is in read.go.
package kubeletcfg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

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
)

// Args is what a kubelet command line says about eviction. A map is nil
// when its flag is absent, so that "not given" and "given empty" differ (an
// empty --eviction-hard= still replaces the file's map, as in the kubelet).
type Args struct {
	Config, ConfigDir string
	Hard, Soft        map[string]string
	SoftGrace         map[string]string
	MinReclaim        map[string]string
	// ImageGCHigh and ImageGCLow are the deprecated but still honoured
	// --image-gc-high-threshold and --image-gc-low-threshold; nil when
	// absent.
	ImageGCHigh, ImageGCLow *int32
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
// excluded), in pflag's forms --name=value, --name value and the single
// dash versions. A map flag may be repeated, its entries adding up, as the
// kubelet's mapStringString does; the last --config wins.
func ParseArgs(args []string) (Args, error) {
	var a Args
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		var dst *map[string]string
		split := thresholds.SplitPairs
		switch name {
		case flagConfig, flagConfigDir, flagImageGCHigh, flagImageGCLow:
		case flagHard:
			dst, split = &a.Hard, thresholds.SplitStatements
		case flagSoft:
			dst, split = &a.Soft, thresholds.SplitStatements
		case flagSoftGrace:
			dst = &a.SoftGrace
		case flagMinReclaim:
			dst = &a.MinReclaim
		default:
			continue
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
		case flagImageGCHigh, flagImageGCLow:
			pct, err := parsePercent(value)
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
		m, err := split(value)
		if err != nil {
			return Args{}, fmt.Errorf("--%s=%s: %w", name, value, err)
		}
		if *dst == nil {
			*dst = map[string]string{}
		}
		maps.Copy(*dst, m)
	}
	return a, nil
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

// File is the part of a KubeletConfiguration file that eviction needs.
// A nil map was not set in the file.
type File struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Hard       map[string]string `json:"evictionHard"`
	Soft       map[string]string `json:"evictionSoft"`
	SoftGrace  map[string]string `json:"evictionSoftGracePeriod"`
	MinReclaim map[string]string `json:"evictionMinimumReclaim"`
	// MergeDefaults is mergeDefaultEvictionSettings: the kubelet's
	// defaults fill the signals a partial evictionHard leaves out.
	MergeDefaults *bool `json:"mergeDefaultEvictionSettings"`
	// ImageGCHigh and ImageGCLow are imageGCHighThresholdPercent and
	// imageGCLowThresholdPercent; nil when not set.
	ImageGCHigh *int32 `json:"imageGCHighThresholdPercent"`
	ImageGCLow  *int32 `json:"imageGCLowThresholdPercent"`
}

// Kind is the kubelet configuration's kind.
const Kind = "KubeletConfiguration"

// ParseFile decodes a KubeletConfiguration file, YAML or JSON. Unknown
// fields are ignored (the kubelet's file has dozens evictd does not need);
// a kind other than KubeletConfiguration is an error.
func ParseFile(data []byte) (File, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return File{}, errors.New("empty file")
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return File{}, oneLine(err)
	}
	var f File
	if err := json.Unmarshal(js, &f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return File{}, fmt.Errorf("field %s: want %s, not a JSON %s", te.Field, te.Type, te.Value)
		}
		return File{}, oneLine(err)
	}
	if f.Kind != Kind {
		return File{}, fmt.Errorf("kind %q: want %s", f.Kind, Kind)
	}
	return f, nil
}

func oneLine(err error) error {
	return errors.New(strings.Join(strings.Fields(err.Error()), " "))
}

// Merge lays the drop-ins over main in their order, as the kubelet's
// --config-dir does: a map set in a drop-in is merged key by key into what
// is there, a scalar set replaces it.
func Merge(main File, dropins ...File) File {
	out := main
	mergeMap := func(dst *map[string]string, src map[string]string) {
		if src == nil {
			return
		}
		m := map[string]string{}
		maps.Copy(m, *dst)
		maps.Copy(m, src)
		*dst = m
	}
	for _, d := range dropins {
		mergeMap(&out.Hard, d.Hard)
		mergeMap(&out.Soft, d.Soft)
		mergeMap(&out.SoftGrace, d.SoftGrace)
		mergeMap(&out.MinReclaim, d.MinReclaim)
		if d.MergeDefaults != nil {
			v := *d.MergeDefaults
			out.MergeDefaults = &v
		}
		if d.ImageGCHigh != nil {
			v := *d.ImageGCHigh
			out.ImageGCHigh = &v
		}
		if d.ImageGCLow != nil {
			v := *d.ImageGCLow
			out.ImageGCLow = &v
		}
	}
	return out
}

// EffectiveHard is the kubelet's evictionHard once its flags and defaults
// are applied: --eviction-hard replaces the file's map; a map nobody set is
// the kubelet's defaults; a partial one keeps only what it names (the other
// signals have no threshold, kubernetes#119985) unless
// mergeDefaultEvictionSettings fills them with the defaults.
func EffectiveHard(f File, a Args) map[string]string {
	hard := f.Hard
	if a.Hard != nil {
		hard = a.Hard
	}
	out := map[string]string{}
	if hard == nil {
		return DefaultHard()
	}
	if f.MergeDefaults != nil && *f.MergeDefaults {
		maps.Copy(out, DefaultHard())
	}
	maps.Copy(out, hard)
	return out
}

// ParseHard turns the kubelet's effective hard map into thresholds by
// signal. Signals evictd does not watch (containerfs.*, which the kubelet
// itself overrides with the nodefs or imagefs ones) are returned in
// ignored; "0%" and "100%" mean no threshold, as in the kubelet.
// allocatableMemory.available follows memory.available unless named, as the
// kubelet's addAllocatableThresholds does for a node that enforces
// allocatable for pods (the default).
func ParseHard(hard map[string]string) (map[thresholds.Signal]thresholds.Value, []string, error) {
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
	if v, ok := known[mem]; ok {
		if _, named := known[alloc]; !named {
			known[alloc] = v
		}
	}
	ths, err := thresholds.Parse(thresholds.Spec{Hard: known})
	if err != nil {
		return nil, ignored, err
	}
	out := make(map[thresholds.Signal]thresholds.Value, len(ths))
	for _, th := range ths {
		out[th.Signal] = th.Value
	}
	return out, ignored, nil
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

// EffectiveImageGC is the kubelet's image collection thresholds once its
// flags and defaults are applied, checked as the kubelet's validation
// does: each within 0..100, low not above high.
func EffectiveImageGC(f File, a Args) (ImageGC, error) {
	g := ImageGC{High: DefaultImageGCHigh, Low: DefaultImageGCLow}
	for _, v := range []struct {
		dst      *int32
		file, fl *int32
	}{{&g.High, f.ImageGCHigh, a.ImageGCHigh}, {&g.Low, f.ImageGCLow, a.ImageGCLow}} {
		if v.file != nil {
			*v.dst = *v.file
		}
		if v.fl != nil {
			*v.dst = *v.fl
		}
	}
	switch {
	case g.High < 0 || g.High > 100:
		return ImageGC{}, fmt.Errorf("imageGCHighThresholdPercent %d: want 0..100", g.High)
	case g.Low < 0 || g.Low > 100:
		return ImageGC{}, fmt.Errorf("imageGCLowThresholdPercent %d: want 0..100", g.Low)
	case g.Low > g.High:
		return ImageGC{}, fmt.Errorf("imageGCLowThresholdPercent %d is above imageGCHighThresholdPercent %d", g.Low, g.High)
	}
	return g, nil
}

// parsePercent reads a kubelet int32 percentage flag's value.
func parsePercent(v string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("want a whole percentage, not %q", v)
	}
	return int32(n), nil
}
