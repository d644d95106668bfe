// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

// How kubelet v1.37 comes to its eviction settings (cmd/kubelet/app/server.go),
// one function a step, each pure; Read runs them in this order on what it
// finds on the host:
//
//  1. Without --config, NoFile: NewKubeletConfiguration, the v1beta1
//     defaults, which have no evictionHard at all (it has no default there,
//     kubernetes#110263). With --config, LoadFile: loadConfigFile decodes
//     the file with the v1beta1 defaults, then gives an evictionHard the
//     file leaves out the Linux defaults (DefaultHard), or, with
//     mergeDefaultEvictionSettings, fills in the signals a partial one leaves
//     out.
//  2. With --config-dir, MergeDropins: mergeKubeletConfigurations marshals
//     that configuration to JSON and lays each *.conf file over it as a JSON
//     merge patch (RFC 7386: a map merged key by key, a null removing a key or
//     the whole field), then applies the v1beta1 defaults again, which still
//     have no evictionHard: step 1's filling is not done again, so a drop-in's
//     mergeDefaultEvictionSettings fills nothing.
//  3. ApplyFlags: the command line parsed again on top
//     (kubeletConfigFlagPrecedence): a map flag replaces the whole map, a
//     number flag the number.
//  4. Config.ImageGC: the kubelet's validation of the image collection
//     thresholds.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The kubelet configuration's kind and the one apiVersion it has.
const (
	Kind       = "KubeletConfiguration"
	APIVersion = "kubelet.config.k8s.io/v1beta1"
)

// File is the part of a v1beta1 KubeletConfiguration that eviction needs,
// by its JSON names; a nil map or pointer was not set. The omitempty tags
// are the v1beta1 type's, so that File marshals as the kubelet marshals its
// configuration before it merges the drop-ins: an empty map is left out.
type File struct {
	APIVersion string            `json:"apiVersion,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Hard       map[string]string `json:"evictionHard,omitempty"`
	Soft       map[string]string `json:"evictionSoft,omitempty"`
	SoftGrace  map[string]string `json:"evictionSoftGracePeriod,omitempty"`
	MinReclaim map[string]string `json:"evictionMinimumReclaim,omitempty"`
	// MergeDefaults is mergeDefaultEvictionSettings.
	MergeDefaults *bool `json:"mergeDefaultEvictionSettings,omitempty"`
	// ImageGCHigh and ImageGCLow are imageGCHighThresholdPercent and
	// imageGCLowThresholdPercent.
	ImageGCHigh *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLow  *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// EnforceNodeAllocatable is enforceNodeAllocatable: with "pods" the
	// kubelet copies memory.available to allocatableMemory.available.
	EnforceNodeAllocatable []string `json:"enforceNodeAllocatable,omitempty"`
}

// ParseFile decodes a --config file, YAML or JSON, as the kubelet's codec
// does: field names case-sensitive, unknown fields ignored (the file has
// dozens evictd does not need), apiVersion and kind required.
func ParseFile(data []byte) (File, error) {
	js, err := toJSON(data)
	if err != nil {
		return File{}, err
	}
	var f File
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &f); err != nil {
		return File{}, oneLine(err)
	}
	return f, checkType(f.APIVersion, f.Kind)
}

// ParseDropin reads a --config-dir file into the JSON the kubelet lays over
// its configuration, checking its apiVersion and kind as the kubelet does.
// A value of the wrong type shows when it is merged (MergeDropins), as in
// the kubelet.
func ParseDropin(data []byte) ([]byte, error) {
	js, err := toJSON(data)
	if err != nil {
		return nil, err
	}
	var tm struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, oneLine(err)
	}
	v, _ := tm.APIVersion.(string)
	k, _ := tm.Kind.(string)
	return js, checkType(v, k)
}

// toJSON is the YAML or JSON of a configuration file as one JSON object.
func toJSON(data []byte) ([]byte, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("empty file")
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, oneLine(err)
	}
	if !strings.HasPrefix(strings.TrimSpace(string(js)), "{") {
		return nil, fmt.Errorf("not a YAML or JSON object: %.40q", strings.TrimSpace(string(data)))
	}
	return js, nil
}

func checkType(apiVersion, kind string) error {
	switch {
	case kind == "" || apiVersion == "":
		return fmt.Errorf("no apiVersion/kind: want apiVersion %s, kind %s", APIVersion, Kind)
	case kind != Kind:
		return fmt.Errorf("kind %q: want %s", kind, Kind)
	case apiVersion != APIVersion:
		return fmt.Errorf("apiVersion %q: want %s", apiVersion, APIVersion)
	}
	return nil
}

func oneLine(err error) error {
	return errors.New(strings.Join(strings.Fields(err.Error()), " "))
}

// Config is the kubelet's eviction configuration at one step of its
// loading.
type Config struct {
	File
	// HardFrom says where each of File.Hard's entries came from.
	HardFrom map[string]string
}

// Where a default came from, in HardFrom.
const (
	fromDefault      = "the kubelet's default (no evictionHard in its --config)"
	fromMergeDefault = "the kubelet's default (mergeDefaultEvictionSettings)"
)

// NoFile is a kubelet without --config: the v1beta1 defaults, with no
// evictionHard.
func NoFile() Config {
	var c Config
	setDefaults(&c.File)
	return c
}

// LoadFile is loadConfigFile: f, the --config file named name, with the
// v1beta1 defaults, its evictionHard left out given the Linux defaults, or
// a partial one filled with them when mergeDefaultEvictionSettings is true.
func LoadFile(f File, name string) Config {
	c := Config{File: f, HardFrom: map[string]string{}}
	c.Hard = maps.Clone(f.Hard)
	setDefaults(&c.File)
	for k := range c.Hard {
		c.HardFrom[k] = "config " + name
	}
	switch {
	case c.Hard == nil:
		c.Hard = DefaultHard()
		for k := range c.Hard {
			c.HardFrom[k] = fromDefault
		}
	case *c.MergeDefaults:
		for k, v := range DefaultHard() {
			if _, ok := c.Hard[k]; !ok {
				c.Hard[k], c.HardFrom[k] = v, fromMergeDefault
			}
		}
	}
	return c
}

// Dropin is a --config-dir file: its path (for errors and HardFrom) and
// its JSON (ParseDropin).
type Dropin struct {
	Path string
	JSON []byte
}

// MergeDropins is mergeKubeletConfigurations: c marshalled, each drop-in
// in order laid over it as a JSON merge patch with the library the kubelet
// uses, the result decoded and given the v1beta1 defaults (and no
// evictionHard defaults). A value of the wrong type names its drop-in.
func MergeDropins(c Config, dropins []Dropin) (Config, error) {
	base, err := json.Marshal(c.File)
	if err != nil {
		return Config{}, err
	}
	from := maps.Clone(c.HardFrom)
	if from == nil {
		from = map[string]string{}
	}
	prev := c.Hard
	for _, d := range dropins {
		merged, err := jsonpatch.MergePatch(base, d.JSON)
		if err != nil {
			return Config{}, fmt.Errorf("drop-in %s: merge: %w", d.Path, err)
		}
		// The kubelet decodes only the final merge, with encoding/json;
		// decoding each step the same way finds the same values and
		// names the drop-in that brought a bad one.
		var f File
		if err := json.Unmarshal(merged, &f); err != nil {
			return Config{}, fmt.Errorf("drop-in %s: %w", d.Path, oneLine(err))
		}
		for k := range from {
			if _, ok := f.Hard[k]; !ok {
				delete(from, k)
			}
		}
		for k, v := range f.Hard {
			if old, ok := prev[k]; !ok || old != v {
				from[k] = "drop-in " + d.Path
			}
		}
		base, prev = merged, f.Hard
	}
	var out Config
	if err := json.Unmarshal(base, &out.File); err != nil {
		return Config{}, oneLine(err)
	}
	setDefaults(&out.File)
	out.HardFrom = from
	return out, nil
}

// ApplyFlags is the command line parsed again on top: each map flag given
// replaces its whole map, each number flag its number.
func ApplyFlags(c Config, a Args) Config {
	if a.Hard != nil {
		c.Hard = maps.Clone(a.Hard)
		c.HardFrom = map[string]string{}
		for k := range c.Hard {
			c.HardFrom[k] = "flag --" + flagHard
		}
	}
	for _, m := range []struct{ dst, src *map[string]string }{
		{&c.Soft, &a.Soft}, {&c.SoftGrace, &a.SoftGrace}, {&c.MinReclaim, &a.MinReclaim},
	} {
		if *m.src != nil {
			*m.dst = maps.Clone(*m.src)
		}
	}
	if a.ImageGCHigh != nil {
		c.ImageGCHigh = ptr(*a.ImageGCHigh)
	}
	if a.ImageGCLow != nil {
		c.ImageGCLow = ptr(*a.ImageGCLow)
	}
	if a.EnforceNodeAllocatable != nil {
		c.EnforceNodeAllocatable = slices.Clone(a.EnforceNodeAllocatable)
	}
	return c
}

// setDefaults is SetDefaults_KubeletConfiguration's part for these fields:
// no evictionHard.
func setDefaults(f *File) {
	if f.ImageGCHigh == nil {
		f.ImageGCHigh = ptr[int32](DefaultImageGCHigh)
	}
	if f.ImageGCLow == nil {
		f.ImageGCLow = ptr[int32](DefaultImageGCLow)
	}
	if f.MergeDefaults == nil {
		f.MergeDefaults = ptr(false)
	}
	if f.EnforceNodeAllocatable == nil {
		// An empty list stays empty, but marshalled before the drop-ins
		// it is left out, and comes back as this default.
		f.EnforceNodeAllocatable = []string{"pods"}
	}
}

func ptr[T any](v T) *T { return &v }

// ImageGC is the kubelet's image collection thresholds, checked as its
// validation checks them: each within 0..100, low below high (the kubelet
// refuses to start otherwise).
func (c Config) ImageGC() (ImageGC, error) {
	var g ImageGC
	if c.ImageGCHigh != nil {
		g.High = *c.ImageGCHigh
	}
	if c.ImageGCLow != nil {
		g.Low = *c.ImageGCLow
	}
	switch {
	case g.High < 0 || g.High > 100:
		return ImageGC{}, fmt.Errorf("imageGCHighThresholdPercent %d: want 0..100", g.High)
	case g.Low < 0 || g.Low > 100:
		return ImageGC{}, fmt.Errorf("imageGCLowThresholdPercent %d: want 0..100", g.Low)
	case g.Low >= g.High:
		return ImageGC{}, fmt.Errorf("imageGCLowThresholdPercent %d is not below imageGCHighThresholdPercent %d: the kubelet refuses to start", g.Low, g.High)
	}
	return g, nil
}
