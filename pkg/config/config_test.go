// SPDX-License-Identifier: Apache-2.0

package config

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/pkg/kubeletcfg"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

func thresholdStrings(t *testing.T, c *Config) []string {
	t.Helper()
	ths, err := c.Thresholds()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ths))
	for i, th := range ths {
		out[i] = th.String()
	}
	return out
}

func TestLoadFullExample(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"memory.available<500Mi (min-reclaim 200Mi)",
		// Derived from memory.available, as the kubelet's addAllocatableThresholds.
		"allocatableMemory.available<500Mi (min-reclaim 200Mi)",
		"nodefs.available<10% (min-reclaim 1Gi)",
		"nodefs.inodesFree<10%",
		"imagefs.available<15%",
		"pid.available<10%",
		"memory.available<1Gi (soft, grace 1m30s) (min-reclaim 200Mi)",
		"nodefs.available<20% (soft, grace 2m0s) (min-reclaim 1Gi)",
	}
	if got := thresholdStrings(t, c); !reflect.DeepEqual(got, want) {
		t.Errorf("thresholds =\n  %v\nwant\n  %v", got, want)
	}
	if c.MaxPodGracePeriod() != time.Minute || c.TransitionPeriod() != 2*time.Minute {
		t.Errorf("max grace %s, transition %s", c.MaxPodGracePeriod(), c.TransitionPeriod())
	}
	if mh := c.MemoryHighThresholds(); !mh.Enabled() || mh.Window != 30*time.Second || mh.Grace != time.Minute ||
		c.StallWindow() != 10*time.Second || c.ResponderWait() != time.Minute || !c.HugepageAware() {
		t.Errorf("memory.high %+v, stall window %s, responder wait %s, hugepage-aware %v", mh, c.StallWindow(), c.ResponderWait(), c.HugepageAware())
	}
	opts, err := c.RankOptions()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.PriorityGroups) != 2 || opts.PriorityGroups[1].Selector == nil || !opts.PriorityGroups[1].Fence ||
		opts.PriorityGroups[0].Offset != -1000 || !reflect.DeepEqual(opts.ExcludedNamespaces, []string{"kube-system"}) {
		t.Errorf("rank options = %+v", opts)
	}
	// The selector really selects by namespace labels.
	pod := &v1.Pod{}
	pod.Namespace, pod.Name, pod.UID = "team-x", "p", "u"
	prio := int32(1_000_000)
	pod.Spec.Priority = &prio
	opts.NamespaceLabels = map[string]map[string]string{"team-x": {"evictd.io/tenant": "true"}}
	if c := rank.Rank(thresholds.MemoryAvailable, nil, []*v1.Pod{pod}, opts).Candidates[0]; c.EffectivePriority != 100 {
		t.Errorf("effective priority in fenced group = %d, want 100", c.EffectivePriority)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"memory.available<300Mi", "allocatableMemory.available<300Mi", "nodefs.available<15%",
		"nodefs.inodesFree<10%", "imagefs.available<15%", "imagefs.inodesFree<10%", "pid.available<10%",
	}
	if got := thresholdStrings(t, c); !reflect.DeepEqual(got, want) {
		t.Errorf("default thresholds = %v, want %v", got, want)
	}
	if c.TransitionPeriod() != 5*time.Minute || c.MaxPodGracePeriod() != 0 || c.IncludeDaemonSetPods {
		t.Errorf("defaults: transition %s, max grace %s, daemonsets %v", c.TransitionPeriod(), c.MaxPodGracePeriod(), c.IncludeDaemonSetPods)
	}
	if got := thresholdStrings(t, Default()); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() thresholds = %v", got)
	}
	// Every default acts before the kubelet's default on the same signal,
	// but the disk space ones: they act where the kubelet's image
	// collection starts (85 % used), never before it and never after the
	// kubelet's own eviction (imagefs.available<15%, on one disk the
	// nodefs too).
	gcFree := kubeletcfg.ImageGC{High: kubeletcfg.DefaultImageGCHigh}.FreeShare()
	kubelet := map[thresholds.Signal]string{
		thresholds.MemoryAvailable: "100Mi", thresholds.NodeFsAvailable: "10%", thresholds.NodeFsInodesFree: "5%",
		thresholds.ImageFsAvailable: "15%", thresholds.ImageFsInodesFree: "5%",
	}
	ths, _ := Default().Thresholds()
	for _, th := range ths {
		k, ok := kubelet[th.Signal]
		if !ok {
			continue
		}
		kv, err := thresholds.ParseValue(k)
		if err != nil {
			t.Fatal(err)
		}
		if th.Signal == thresholds.NodeFsAvailable || th.Signal == thresholds.ImageFsAvailable {
			imageFsKubelet := thresholds.Value{Percentage: 0.15}
			if th.Value.Quantity != nil || th.Value.Percentage > gcFree || th.Value.Percentage < imageFsKubelet.Percentage {
				t.Errorf("%s: default %s opens a disk episode before the kubelet's image collection (%.0f%% available) or after its eviction (imagefs.available<15%%)", th.Signal, th.Value, 100*gcFree)
			}
			continue
		}
		for _, capacity := range []int64{1 << 30, 16 << 30, 1 << 40} {
			if th.Value.Amount(capacity) <= kv.Amount(capacity) {
				t.Errorf("%s: default %s does not act before the kubelet's %s at capacity %d", th.Signal, th.Value, k, capacity)
			}
		}
	}
}

func TestDecode(t *testing.T) {
	head := "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\n"
	tests := []struct {
		name    string
		yaml    string
		wantErr string
		// check runs on success.
		check func(t *testing.T, c *Config)
	}{
		{
			name: "one threshold keeps the others' defaults",
			yaml: head + "evictionHard:\n  memory.available: 1Gi\n",
			check: func(t *testing.T, c *Config) {
				if c.EvictionHard["memory.available"] != "1Gi" || c.EvictionHard["nodefs.available"] != "15%" || len(c.EvictionHard) != 7 {
					t.Errorf("evictionHard = %v", c.EvictionHard)
				}
			},
		},
		{
			name: "a stall threshold and its window",
			yaml: head + "evictionHard:\n  memory.pressureSome: 40%\nevictionStallWindow: 4s\n",
			check: func(t *testing.T, c *Config) {
				if c.StallWindow() != 4*time.Second {
					t.Errorf("stall window %s, want 4s", c.StallWindow())
				}
				if !slices.Contains(thresholdStrings(t, c), "memory.pressureSome>40%") {
					t.Errorf("thresholds %v lack memory.pressureSome>40%%", thresholdStrings(t, c))
				}
			},
		},
		{
			name:    "a stall window out of range",
			yaml:    head + "evictionStallWindow: 10m\n",
			wantErr: "evictionStallWindow 10m0s must be within 1s..5m0s",
		},
		{
			name:    "a bad stall window is named",
			yaml:    head + "evictionPressureTransitionPeriod: 1m\nevictionStallWindow: soon\n",
			wantErr: `evictionStallWindow: time: invalid duration "soon"`,
		},
		{
			name:    "a bad transition period is named",
			yaml:    head + "evictionPressureTransitionPeriod: later\nevictionStallWindow: 5s\n",
			wantErr: `evictionPressureTransitionPeriod: time: invalid duration "later"`,
		},
		{
			name: "none disables a default",
			yaml: head + "evictionHard:\n  pid.available: none\n",
			check: func(t *testing.T, c *Config) {
				for _, s := range thresholdStrings(t, c) {
					if strings.HasPrefix(s, "pid.") {
						t.Errorf("pid threshold still present: %s", s)
					}
				}
			},
		},
		{
			name: "JSON works too",
			yaml: `{"apiVersion":"evictd.io/v1alpha1","kind":"EvictdConfiguration","includeDaemonSetPods":true}`,
			check: func(t *testing.T, c *Config) {
				if !c.IncludeDaemonSetPods {
					t.Error("includeDaemonSetPods not read")
				}
			},
		},
		{name: "empty", yaml: "  \n", wantErr: "empty file"},
		{name: "wrong apiVersion", yaml: "apiVersion: evictd/v1\nkind: EvictdConfiguration\n", wantErr: `apiVersion "evictd/v1"`},
		{name: "wrong kind", yaml: "apiVersion: evictd.io/v1alpha1\nkind: EvictionPolicy\n", wantErr: `kind "EvictionPolicy"`},
		{name: "missing type", yaml: "evictionHard: {}\n", wantErr: `apiVersion ""`},
		{name: "unknown field", yaml: head + "evictionHardd: {}\n", wantErr: `unknown field "evictionHardd"`},
		{name: "wrong case", yaml: head + "evictionhard: {}\n", wantErr: "evictionhard"},
		{name: "duplicate field", yaml: head + "excludedNamespaces: [a]\nexcludedNamespaces: [b]\n", wantErr: "excludedNamespaces"},
		{name: "unknown field in a group", yaml: head + "priorityGroups:\n- name: a\n  namespaces: [a]\n  weight: 3\n", wantErr: `unknown field "priorityGroups[0].weight"`},
		{name: "not YAML", yaml: head + "evictionHard: [\n", wantErr: "yaml"},
		{
			name: "bare numbers are read as their text",
			yaml: head + "evictionHard:\n  pid.available: 1000\n  memory.available: 5e8\n",
			check: func(t *testing.T, c *Config) {
				if c.EvictionHard["pid.available"] != "1000" || c.EvictionHard["memory.available"] != "500000000" {
					t.Errorf("evictionHard = %v", c.EvictionHard)
				}
			},
		},
		{name: "non-string value", yaml: head + "evictionHard:\n  pid.available: true\n", wantErr: "pid.available: value true is not a string or number"},
		{name: "negative bare number", yaml: head + "evictionHard:\n  pid.available: -5\n", wantErr: "pid.available<-5"},
		{name: "bare number grace", yaml: head + "evictionSoft:\n  pid.available: 50%\nevictionSoftGracePeriod:\n  pid.available: 90\n", wantErr: `pid.available="90" is not a duration`},
		{name: "bad threshold", yaml: head + "evictionHard:\n  memory.available: 0Mi\n", wantErr: "memory.available<0Mi"},
		{name: "unknown signal", yaml: head + "evictionSoft:\n  memory.free: 1Gi\n", wantErr: `"memory.free"`},
		{name: "soft without grace", yaml: head + "evictionSoft:\n  memory.available: 1Gi\n", wantErr: "has no grace period"},
		{name: "negative max grace", yaml: head + "evictionMaxPodGracePeriod: -1\n", wantErr: "evictionMaxPodGracePeriod -1"},
		{name: "max grace overflows int32", yaml: head + "evictionMaxPodGracePeriod: 99999999999\n", wantErr: "evictionMaxPodGracePeriod"},
		{name: "negative transition", yaml: head + "evictionPressureTransitionPeriod: -1s\n", wantErr: "evictionPressureTransitionPeriod -1s"},
		{name: "bad transition", yaml: head + "evictionPressureTransitionPeriod: soon\n", wantErr: "soon"},
		{name: "bad excluded namespace", yaml: head + "excludedNamespaces: [Kube_System]\n", wantErr: `excludedNamespaces[0]: namespace "Kube_System"`},
		{name: "empty optOut", yaml: head + "optOut: {}\n", wantErr: "optOut: needs namespaces or a namespaceSelector"},
		{name: "bad optOut namespace", yaml: head + "optOut: {namespaces: [Team_A]}\n", wantErr: `optOut.namespaces[0]: namespace "Team_A"`},
		{name: "optOut namespace twice", yaml: head + "optOut: {namespaces: [a, b, a]}\n", wantErr: `optOut.namespaces[2]: namespace "a" is listed twice`},
		{
			name:    "bad optOut selector",
			yaml:    head + "optOut:\n  namespaceSelector:\n    matchExpressions:\n    - {key: tier, operator: Near, values: [x]}\n",
			wantErr: "optOut.namespaceSelector:",
		},
		{name: "unknown field in optOut", yaml: head + "optOut: {namespace: [a]}\n", wantErr: `unknown field "optOut.namespace"`},
		{name: "optOut namespaces as a string", yaml: head + "optOut: {namespaces: team-a}\n", wantErr: "optOut.namespaces"},
		{name: "group without name", yaml: head + "priorityGroups:\n- namespaces: [a]\n", wantErr: "priorityGroups[0]: name is empty"},
		{name: "group without members", yaml: head + "priorityGroups:\n- name: g\n  offset: 3\n", wantErr: `priorityGroups[0] ("g"): needs namespaces or a namespaceSelector`},
		{name: "duplicate group name", yaml: head + "priorityGroups:\n- name: g\n  namespaces: [a]\n- name: g\n  namespaces: [b]\n", wantErr: `priorityGroups[1] ("g"): name is used by another group`},
		{
			name:    "namespace in two groups",
			yaml:    head + "priorityGroups:\n- name: g1\n  namespaces: [a, shared]\n- name: g2\n  namespaces: [shared]\n",
			wantErr: `priorityGroups[1] ("g2"): namespace "shared" is already in group "g1"`,
		},
		{name: "namespace twice in a group", yaml: head + "priorityGroups:\n- name: g\n  namespaces: [a, a]\n", wantErr: `namespace "a" is listed twice`},
		{
			name:    "bad selector",
			yaml:    head + "priorityGroups:\n- name: g\n  namespaceSelector:\n    matchExpressions:\n    - {key: tier, operator: Near, values: [x]}\n",
			wantErr: `priorityGroups[0] ("g"): namespaceSelector:`,
		},
		{name: "offset out of int32", yaml: head + "priorityGroups:\n- name: g\n  namespaces: [a]\n  offset: 3000000000\n", wantErr: "offset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode error = %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	for _, name := range []string{"unknown-field.yaml", "bad-threshold.yaml", "does-not-exist.yaml"} {
		path := filepath.Join("testdata", name)
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Load(%s) error = %v, want one naming the file", path, err)
		}
	}
}

func parseFlags(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := Default()
	c.BindFlags(fs, fs, fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return c, c.Complete()
}

func TestFlags(t *testing.T) {
	full := filepath.Join("testdata", "full.yaml")
	tests := []struct {
		name    string
		args    []string
		want    []string // thresholds, when set
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{
			name: "no flags: defaults",
			want: []string{"memory.available<300Mi", "allocatableMemory.available<300Mi", "nodefs.available<15%", "nodefs.inodesFree<10%", "imagefs.available<15%", "imagefs.inodesFree<10%", "pid.available<10%"},
		},
		{
			name: "kubelet-style flags merge with the defaults",
			args: []string{"--eviction-hard=memory.available<1Gi,imagefs.inodesFree<none", "--eviction-soft=nodefs.available<30%",
				"--eviction-soft-grace-period=nodefs.available=45s", "--eviction-minimum-reclaim=memory.available=5%"},
			want: []string{"memory.available<1Gi (min-reclaim 5%)", "allocatableMemory.available<1Gi (min-reclaim 5%)", "nodefs.available<15%", "nodefs.inodesFree<10%", "imagefs.available<15%", "pid.available<10%", "nodefs.available<30% (soft, grace 45s)"},
		},
		{
			name: "flags override the file per signal",
			args: []string{"--config", full, "--eviction-hard=nodefs.available<5Gi", "--eviction-soft-grace-period=memory.available=10s",
				"--eviction-max-pod-grace-period=5", "--eviction-pressure-transition-period=30s"},
			want: []string{
				"memory.available<500Mi (min-reclaim 200Mi)", "allocatableMemory.available<500Mi (min-reclaim 200Mi)", "nodefs.available<5Gi (min-reclaim 1Gi)",
				"nodefs.inodesFree<10%", "imagefs.available<15%", "pid.available<10%",
				"memory.available<1Gi (soft, grace 10s) (min-reclaim 200Mi)", "nodefs.available<20% (soft, grace 2m0s) (min-reclaim 1Gi)",
			},
			check: func(t *testing.T, c *Config) {
				if c.MaxPodGracePeriod() != 5*time.Second || c.TransitionPeriod() != 30*time.Second || len(c.PriorityGroups) != 2 {
					t.Errorf("max grace %s, transition %s, groups %d", c.MaxPodGracePeriod(), c.TransitionPeriod(), len(c.PriorityGroups))
				}
			},
		},
		{
			name: "unset scalar flags keep the file's values",
			args: []string{"--config", full},
			check: func(t *testing.T, c *Config) {
				if c.MaxPodGracePeriod() != time.Minute || c.TransitionPeriod() != 2*time.Minute {
					t.Errorf("max grace %s, transition %s", c.MaxPodGracePeriod(), c.TransitionPeriod())
				}
			},
		},
		{
			name: "a repeated map flag adds up",
			args: []string{"--eviction-hard=memory.available<1Gi", "--eviction-hard=pid.available<1000"},
			check: func(t *testing.T, c *Config) {
				if c.EvictionHard["memory.available"] != "1Gi" || c.EvictionHard["pid.available"] != "1000" {
					t.Errorf("evictionHard = %v", c.EvictionHard)
				}
			},
		},
		{name: "empty flag changes nothing", args: []string{"--eviction-hard="}, check: func(t *testing.T, c *Config) {
			if len(thresholdStrings(t, c)) != 7 {
				t.Error("an empty --eviction-hard dropped thresholds (kubernetes#71660)")
			}
		}},
		{name: "signal twice across repeats", args: []string{"--eviction-hard=memory.available<1Gi", "--eviction-hard=memory.available<2Gi"}, wantErr: "memory.available is given twice (the kubelet keeps the last one given"},
		{name: "bad operator", args: []string{"--eviction-hard=memory.available>1Gi"}, wantErr: "only < is allowed"},
		{name: "bad value", args: []string{"--eviction-hard=memory.available<lots"}, wantErr: "memory.available<lots"},
		{name: "soft flag without grace", args: []string{"--eviction-soft=memory.available<2Gi"}, wantErr: "has no grace period"},
		{name: "bad max grace", args: []string{"--eviction-max-pod-grace-period=1.5"}, wantErr: "not a whole number of seconds"},
		{name: "negative max grace", args: []string{"--eviction-max-pod-grace-period=-1"}, wantErr: "must not be negative (the kubelet 1.37 takes a negative value as 1 s"},
		{name: "missing config file", args: []string{"--config", filepath.Join("testdata", "nope.yaml")}, wantErr: "nope.yaml"},
		{name: "bad config file", args: []string{"--config", filepath.Join("testdata", "unknown-field.yaml")}, wantErr: `unknown field "evictionHardd"`},
		{name: "flags make a valid file invalid", args: []string{"--config", full, "--eviction-soft=pid.available<50%"}, wantErr: "full.yaml (with flags): eviction-soft: pid.available<50% has no grace period"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				if got := thresholdStrings(t, c); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("thresholds =\n  %v\nwant\n  %v", got, tc.want)
				}
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestCompleteWithoutFlags(t *testing.T) {
	c := &Config{EvictionHard: map[string]string{"memory.available": "2Gi"}}
	if err := c.Complete(); err != nil {
		t.Fatal(err)
	}
	if c.APIVersion != APIVersion || c.EvictionHard["pid.available"] != "10%" {
		t.Errorf("Complete did not default: %+v", c)
	}
	bad := &Config{EvictionHard: map[string]string{"memory.available": "0"}}
	if err := bad.Complete(); err == nil {
		t.Error("Complete accepted memory.available<0")
	}
}

// swapInRanking: false ranks by working set alone; left out, by footprint.
func TestSwapInRanking(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool // WorkingSetOnly
	}{
		{"apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\n", false},
		{"apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nswapInRanking: true\n", false},
		{"apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\nswapInRanking: false\n", true},
	} {
		_, opts := rankOptionsOf(t, tc.yaml)
		if opts.WorkingSetOnly != tc.want {
			t.Errorf("%q: WorkingSetOnly %v, want %v", tc.yaml, opts.WorkingSetOnly, tc.want)
		}
	}
}

// allocatableMemory.available follows a named hard memory.available, as the
// kubelet adds one for every hard memory.available threshold; named itself,
// or with memory.available left to its default, it keeps its own.
func TestAllocatableFollowsMemoryAvailable(t *testing.T) {
	for _, tc := range []struct {
		hard, reclaim map[string]string
		want          string
	}{
		{map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "100Mi"}, "allocatableMemory.available<1Gi (min-reclaim 100Mi)"},
		{map[string]string{"memory.available": "1Gi", "allocatableMemory.available": "500Mi"}, nil, "allocatableMemory.available<500Mi"},
		{map[string]string{"memory.available": "none"}, nil, ""},
		{nil, nil, "allocatableMemory.available<300Mi"},
	} {
		c := &Config{EvictionHard: tc.hard, EvictionMinimumReclaim: tc.reclaim}
		if err := c.Complete(); err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, s := range thresholdStrings(t, c) {
			if strings.HasPrefix(s, "allocatableMemory.available") {
				got = s
			}
		}
		if got != tc.want {
			t.Errorf("hard %v: allocatable %q, want %q", tc.hard, got, tc.want)
		}
	}
}

// Nobody may opt out unless the configuration says who: the rank options
// carry the namespaces and selector it names, and nothing by default.
func TestOptOutRankOptions(t *testing.T) {
	head := "apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\n"
	for _, tc := range []struct {
		name, yaml    string
		wantNames     []string
		wantSelector  string // "" none
		wantSelectors bool
	}{
		{name: "default", yaml: head},
		{name: "by name", yaml: head + "optOut: {namespaces: [platform, ops]}\n", wantNames: []string{"platform", "ops"}},
		{name: "by label", yaml: head + "optOut:\n  namespaceSelector:\n    matchLabels: {evictd.io/opt-out: allowed}\n",
			wantSelector: "evictd.io/opt-out=allowed", wantSelectors: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, opts := rankOptionsOf(t, tc.yaml)
			if !reflect.DeepEqual(opts.OptOut.Namespaces, tc.wantNames) {
				t.Errorf("opt-out namespaces %v, want %v", opts.OptOut.Namespaces, tc.wantNames)
			}
			got := ""
			if opts.OptOut.Selector != nil {
				got = opts.OptOut.Selector.String()
			}
			if got != tc.wantSelector {
				t.Errorf("opt-out selector %q, want %q", got, tc.wantSelector)
			}
			if c.HasSelectors() != tc.wantSelectors {
				t.Errorf("HasSelectors() = %v, want %v: the namespace informer runs only for it", c.HasSelectors(), tc.wantSelectors)
			}
		})
	}
}

// rankOptionsOf loads a configuration file of the given text and returns
// it and its rank options.
func rankOptionsOf(t *testing.T, yaml string) (*Config, rank.Options) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.RankOptions()
	if err != nil {
		t.Fatal(err)
	}
	return c, opts
}
