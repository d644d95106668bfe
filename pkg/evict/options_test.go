// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

func ptr[T any](v T) *T { return &v }

func podWithGrace(g *int64) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: g}}
}

func TestGracePeriod(t *testing.T) {
	o := Defaults()
	o.MaxPodGracePeriod = 60
	o.HardGracePeriod = 5
	tests := []struct {
		name     string
		pod      *v1.Pod
		hard     bool
		override *int64
		want     int64
	}{
		{"soft, unset grace defaults to 30", podWithGrace(nil), false, nil, 30},
		{"soft, pod asks less than cap", podWithGrace(ptr[int64](20)), false, nil, 20},
		{"soft, pod asks more than cap", podWithGrace(ptr[int64](600)), false, nil, 60},
		{"hard, unset grace capped", podWithGrace(nil), true, nil, 5},
		{"hard, pod asks less than cap", podWithGrace(ptr[int64](2)), true, nil, 2},
		{"hard, pod asks more", podWithGrace(ptr[int64](30)), true, nil, 5},
		{"pod asks 0: never sent as 0", podWithGrace(ptr[int64](0)), false, nil, 1},
		{"pod asks 0, hard", podWithGrace(ptr[int64](0)), true, nil, 1},
		{"negative pod grace floors at 1", podWithGrace(ptr[int64](-3)), false, nil, 1},
		{"override shortens soft", podWithGrace(ptr[int64](30)), false, ptr[int64](7), 7},
		{"override shortens hard", podWithGrace(ptr[int64](30)), true, ptr[int64](2), 2},
		{"override cannot lengthen past cap", podWithGrace(ptr[int64](600)), false, ptr[int64](300), 60},
		{"override cannot lengthen past pod", podWithGrace(ptr[int64](10)), false, ptr[int64](50), 10},
		{"override 0 is 1, not the pod's full grace", podWithGrace(ptr[int64](30)), false, ptr[int64](0), 1},
		{"negative override is 1", podWithGrace(ptr[int64](30)), true, ptr[int64](-1), 1},
		{"nil pod treated as unset grace", nil, false, nil, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := o.GracePeriod(tt.pod, tt.hard, tt.override); got != tt.want {
				t.Errorf("GracePeriod = %d, want %d", got, tt.want)
			}
		})
	}
}

// The default soft grace is the pod's own, however long it asked for, as
// with the kubelet's --eviction-max-pod-grace-period=0; a hard threshold
// still caps it.
func TestDefaultsGiveSoftEvictionsThePodsOwnGrace(t *testing.T) {
	o := Defaults()
	for _, asked := range []int64{1, 30, 600, 86400} {
		if got := o.GracePeriod(podWithGrace(ptr(asked)), false, nil); got != asked {
			t.Errorf("soft eviction of a pod asking %ds: grace %d, want its own", asked, got)
		}
	}
	if got := o.GracePeriod(podWithGrace(ptr[int64](600)), true, nil); got != o.HardGracePeriod {
		t.Errorf("hard eviction of a pod asking 600s: grace %d, want the hard cap %d", got, o.HardGracePeriod)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr []string
	}{
		{"defaults are valid", func(*Options) {}, nil},
		{"best-effort valid", func(o *Options) { o.PDBPolicy = PDBBestEffort }, nil},
		{"bad policy", func(o *Options) { o.PDBPolicy = "lenient" }, []string{"--pdb-policy", `"lenient"`}},
		{"empty policy", func(o *Options) { o.PDBPolicy = "" }, []string{"--pdb-policy", `""`}},
		{"soft grace 0", func(o *Options) { o.MaxPodGracePeriod = 0 }, []string{"--eviction-max-pod-grace-period 0", "at least 1"}},
		{"hard grace negative", func(o *Options) { o.HardGracePeriod = -1 }, []string{"--eviction-hard-grace-period -1"}},
		{"rate 0", func(o *Options) { o.Rate = 0 }, []string{"--eviction-rate 0"}},
		{"rate NaN", func(o *Options) { o.Rate = math.NaN() }, []string{"--eviction-rate NaN"}},
		{"burst 0", func(o *Options) { o.Burst = 0 }, []string{"--eviction-burst 0"}},
		{"cap 0", func(o *Options) { o.MaxPerEpisode = 0 }, []string{"--eviction-max-per-episode 0"}},
		{"timeout 0", func(o *Options) { o.CallTimeout = 0 }, []string{"--eviction-api-timeout 0s"}},
		{"all reported at once", func(o *Options) { o.Burst = 0; o.Rate = -1 }, []string{"--eviction-burst 0", "--eviction-rate -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Defaults()
			tt.mutate(&o)
			err := o.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error, got none")
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestAddFlags(t *testing.T) {
	tests := []struct {
		args    []string
		check   func(Options) bool
		wantErr string
	}{
		{nil, func(o Options) bool { return o == Defaults() }, ""},
		{[]string{"--dry-run", "--pdb-policy=best-effort", "--eviction-hard-grace-period=2",
			"--eviction-rate=0.5", "--eviction-burst=3", "--eviction-max-per-episode=4", "--eviction-api-timeout=3s"},
			func(o Options) bool {
				return o.DryRun && o.PDBPolicy == PDBBestEffort && o.MaxPodGracePeriod == NoGraceCap && o.HardGracePeriod == 2 &&
					o.Rate == 0.5 && o.Burst == 3 && o.MaxPerEpisode == 4 && o.CallTimeout == 3*time.Second
			}, ""},
		{[]string{"--pdb-policy=always"}, nil, `"always"`},
		{[]string{"--eviction-burst=many"}, nil, "eviction-burst"},
		// pkg/config owns the soft grace cap: one definition of the flag.
		{[]string{"--eviction-max-pod-grace-period=90"}, nil, "unknown flag: --eviction-max-pod-grace-period"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o := Defaults()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o.AddFlags(fs)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%v) error = %v, want one containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("options after %v: %+v", tt.args, o)
			}
		})
	}
}
