// SPDX-License-Identifier: Apache-2.0

package options

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/pressure/wakeup"
)

func TestParseWakeupSources(t *testing.T) {
	tests := []struct {
		in       string
		src      wakeup.Sources
		adaptive bool
		err      string
	}{
		{DefaultWakeupSources, wakeup.Sources{Memcg: true, PSI: true, MemoryEvents: true}, true, ""},
		{"none", wakeup.Sources{}, false, ""},
		{"adaptive", wakeup.Sources{}, true, ""},
		{"psi, memcg", wakeup.Sources{Memcg: true, PSI: true}, false, ""},
		{"psi,psi", wakeup.Sources{}, false, "given twice"},
		{"none,adaptive", wakeup.Sources{}, false, "cannot be combined"},
		{"", wakeup.Sources{}, false, `unknown source ""`},
		{"inotify", wakeup.Sources{}, false, `unknown source "inotify"`},
	}
	for _, tc := range tests {
		src, adaptive, err := ParseWakeupSources(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), FlagWakeupSources) {
				t.Errorf("%q: error %v, want one naming the flag and %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || src != tc.src || adaptive != tc.adaptive {
			t.Errorf("%q = %+v, %v, %v; want %+v, %v", tc.in, src, adaptive, err, tc.src, tc.adaptive)
		}
	}
}

func TestOptionsCompleteMergesFlagsAndConfig(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		maxGrace int64
		ds       bool
	}{
		// The kubelet's meaning: 0 leaves each pod its own grace period.
		{"defaults", nil, math.MaxInt32, false},
		{"soft grace cap", []string{"--eviction-max-pod-grace-period=45"}, 45, false},
		{"bare boolean", []string{"--include-daemonset-pods"}, math.MaxInt32, true},
		{"explicit false", []string{"--include-daemonset-pods=false"}, math.MaxInt32, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := completedOptions(t, tc.args)
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			if o.Evict.MaxPodGracePeriod != tc.maxGrace || o.Config.IncludeDaemonSetPods != tc.ds {
				t.Errorf("max pod grace %d, daemonset pods %v; want %d, %v", o.Evict.MaxPodGracePeriod, o.Config.IncludeDaemonSetPods, tc.maxGrace, tc.ds)
			}
		})
	}
}

func TestOptionsValidateWrapsErrUsage(t *testing.T) {
	o := NewOptions()
	o.NodeName = "n1"
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	o.MetricsAddr = "localhost"
	err := o.Validate()
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), `"localhost"`) {
		t.Errorf("Validate = %v, want ErrUsage naming the address", err)
	}
}

// TestOptionsValidateCgroupPaths: --cgroup-root and --node-cgroup must be
// absolute cgroup paths; a bad one is ErrUsage naming the flag and value,
// before anything starts. The node cgroup defaults to the root "/", as the
// kubelet's node memory, whatever --cgroup-root is.
func TestOptionsValidateCgroupPaths(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" when valid
	}{
		{nil, ""},
		{[]string{"--cgroup-root=/kubelet"}, ""},
		{[]string{"--cgroup-root=/kubelet", "--node-cgroup=/kubelet"}, ""},
		{[]string{"--node-cgroup=kubelet"}, `invalid --node-cgroup "kubelet": must be an absolute path`},
		{[]string{"--node-cgroup="}, `invalid --node-cgroup ""`},
		{[]string{"--node-cgroup=/kubelet/../.."}, `invalid --node-cgroup "/kubelet/../.."`},
		{[]string{"--cgroup-root=kubelet"}, `invalid --cgroup-root "kubelet"`},
	}
	for _, tc := range tests {
		o := completedOptions(t, tc.args)
		if len(tc.args) == 0 && (o.NodeCgroup != "/" || o.CgroupRoot != "/") {
			t.Errorf("defaults: node cgroup %q, cgroup root %q; want / and /", o.NodeCgroup, o.CgroupRoot)
		}
		err := o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (!errors.Is(err, ErrUsage) || !strings.Contains(fmt.Sprint(err), tc.want)):
			t.Errorf("%v: Validate = %v; want ErrUsage with %q", tc.args, err, tc.want)
		}
	}
}

// TestOptionsValidateWindows: the longest wait between observations must
// leave the memory.high family a reading at least every half of its
// window, or a quiet container's readings fall more than a window apart; a
// wait of exactly half is enough. A family that is off asks nothing of it,
// and the stall signals take the kubelet's cadence (pkg/stall).
func TestOptionsValidateWindows(t *testing.T) {
	const stall = "--eviction-hard=memory.pressureSome>40%"
	tests := []struct {
		args []string
		want string // "" when valid
	}{
		{nil, ""},
		{[]string{"--memory-high-eviction"}, ""},
		{[]string{"--memory-high-eviction", "--memory-high-window=10s", "--housekeeping-interval=5s"}, ""},
		{[]string{"--memory-high-eviction", "--memory-high-window=10s", "--housekeeping-interval=6s"},
			"invalid --housekeeping-interval 6s: more than half of --memory-high-window 10s"},
		{[]string{"--housekeeping-interval=1m"}, ""},
		{[]string{stall}, ""},
		{[]string{stall, "--housekeeping-interval=5s"}, ""},
		{[]string{stall, "--housekeeping-interval=10s"}, ""},
		{[]string{stall, "--eviction-stall-window=1m", "--housekeeping-interval=30s"}, ""},
		{[]string{"--eviction-stall-window=2s", "--housekeeping-interval=10s"}, ""},
	}
	for _, tc := range tests {
		err := completedOptions(t, tc.args).Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (!errors.Is(err, ErrUsage) || !strings.Contains(fmt.Sprint(err), tc.want)):
			t.Errorf("%v: Validate = %v; want ErrUsage with %q", tc.args, err, tc.want)
		}
	}
}

// completedOptions are the options of node n1 with args parsed and
// completed.
func completedOptions(t *testing.T, args []string) *Options {
	t.Helper()
	o, err := parsedOptions(t, args)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// parsedOptions are the options of node n1 with args parsed, and what
// completing them said.
func parsedOptions(t *testing.T, args []string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	o.NodeName = "n1"
	sections := &cliflag.Sections{}
	o.AddFlags(sections)
	if err := sections.FlagSet("t").Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, o.Complete()
}

// TestNodeBrakeTaintEffectDefault: the brake's taint is PreferNoSchedule
// unless asked otherwise (a leftover can never make a node unschedulable;
// the scheduler's score still keeps new pods off the node whenever another
// fits), as the flag's help says; NoSchedule stays a choice.
func TestNodeBrakeTaintEffectDefault(t *testing.T) {
	const want = "PreferNoSchedule"
	if got := NewOptions().NodeBrakeTaintEffect; got != want {
		t.Errorf("NodeBrakeTaintEffect defaults to %q; want %q", got, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, want},
		{[]string{"--" + FlagNodeBrakeTaintEffect + "=NoSchedule"}, "NoSchedule"},
	} {
		o := NewOptions()
		sections := &cliflag.Sections{}
		o.AddFlags(sections)
		fs := sections.FlagSet("t")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if o.NodeBrakeTaintEffect != tc.want {
			t.Errorf("%v: NodeBrakeTaintEffect %q; want %q", tc.args, o.NodeBrakeTaintEffect, tc.want)
		}
		if fl := fs.Lookup(FlagNodeBrakeTaintEffect); tc.args == nil && (fl.DefValue != want || !strings.Contains(fl.Usage, "PreferNoSchedule (the default")) {
			t.Errorf("--%s: default %q, usage %q; want default %q and the usage saying so", FlagNodeBrakeTaintEffect, fl.DefValue, fl.Usage, want)
		}
	}
}
