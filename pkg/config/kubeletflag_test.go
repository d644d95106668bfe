// SPDX-License-Identifier: Apache-2.0

package config

import (
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	kubeletflag "k8s.io/component-base/cli/flag"
)

// TestThresholdFlagsReadAsTheKubelet runs each flag value through the
// kubelet's own flag types (component-base's LangleSeparatedMapStringString
// for --eviction-hard and --eviction-soft, MapStringString for the grace
// periods and minimum reclaims) and through evictd's. Where the kubelet
// accepts a value evictd reads the same map; where they differ, the case
// says how, and evictd's answer is a refusal naming the value or a stall
// signal the kubelet has no syntax for. The kubelet's types are not evictd's
// parser (pkg/config/flags.go says why); this keeps the two in step.
func TestThresholdFlagsReadAsTheKubelet(t *testing.T) {
	tests := []struct {
		name   string
		flag   string
		values []string // one per repetition of the flag
		// differs: "" when both read the same map; otherwise evictd's
		// error (a substring), or "stall" when evictd reads a stall
		// threshold the kubelet refuses.
		differs string
	}{
		{name: "one threshold", flag: FlagEvictionHard, values: []string{"memory.available<100Mi"}},
		{name: "a list", flag: FlagEvictionHard, values: []string{"memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%"}},
		{name: "spaces around names and values", flag: FlagEvictionHard, values: []string{" memory.available < 1Gi ,nodefs.available<10%"}},
		{name: "an empty entry", flag: FlagEvictionHard, values: []string{"memory.available<1Gi,,pid.available<1000"}},
		{name: "repeated flags add up", flag: FlagEvictionHard, values: []string{"memory.available<1Gi", "pid.available<1000"}},
		{name: "none", flag: FlagEvictionHard, values: []string{"imagefs.inodesFree<none"}},
		{name: "empty value", flag: FlagEvictionHard, values: []string{""}},
		{name: "soft", flag: FlagEvictionSoft, values: []string{"memory.available<1.5Gi,imagefs.available<15%"}},
		{name: "grace periods", flag: FlagEvictionSoftGracePeriod, values: []string{"memory.available=1m30s, nodefs.available = 2m"}},
		{name: "minimum reclaim", flag: FlagEvictionMinimumReclaim, values: []string{"memory.available=0Mi,nodefs.available=500Mi", "imagefs.available=2Gi"}},

		// The kubelet keeps the last value of a signal given twice;
		// evictd refuses to guess which one was meant.
		{name: "a signal twice in one value", flag: FlagEvictionHard, values: []string{"memory.available<1Gi,memory.available<2Gi"},
			differs: `"memory.available<2Gi": signal memory.available is given twice`},
		{name: "a signal twice across repeats", flag: FlagEvictionHard, values: []string{"memory.available<1Gi", "memory.available<2Gi"},
			differs: "signal memory.available is given twice"},
		{name: "a grace period twice", flag: FlagEvictionSoftGracePeriod, values: []string{"memory.available=1m,memory.available=2m"},
			differs: "signal memory.available is given twice"},
		// The kubelet splits at the first "<" and reads "=1Gi" as the value.
		{name: "<=", flag: FlagEvictionHard, values: []string{"memory.available<=1Gi"}, differs: `"memory.available<=1Gi": unsupported operator`},
		// The stall signals are evictd's; the kubelet has no ">".
		{name: "a stall signal", flag: FlagEvictionHard, values: []string{"memory.available<1Gi,memory.pressureSome>40%"}, differs: "stall"},
		// An entry of spaces is malformed to the kubelet, empty to evictd.
		{name: "a trailing comma and space", flag: FlagEvictionHard, values: []string{"memory.available<1Gi, "}, differs: "lenient"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kubelet, kerr := kubeletRead(tc.flag, tc.values)
			ours, err := evictdRead(tc.flag, tc.values)
			switch tc.differs {
			case "":
				if kerr != nil || err != nil {
					t.Fatalf("kubelet: %v, evictd: %v; want both to accept %q", kerr, err, tc.values)
				}
				if !maps.Equal(kubelet, ours) {
					t.Errorf("--%s %q: kubelet reads %v, evictd %v", tc.flag, tc.values, kubelet, ours)
				}
			case "stall", "lenient":
				if err != nil {
					t.Fatalf("evictd refused %q: %v", tc.values, err)
				}
				if kerr == nil {
					t.Errorf("the kubelet's type now reads %q (as %v): evictd's difference here is gone; update this case and flags.go", tc.values, kubelet)
				}
				if tc.differs == "stall" && ours["memory.pressureSome"] != "40%" {
					t.Errorf("evictd read %v, want memory.pressureSome 40%%", ours)
				}
			default:
				if kerr != nil {
					t.Errorf("the kubelet's type now refuses %q (%v): update this case and flags.go", tc.values, kerr)
				}
				if err == nil || !strings.Contains(err.Error(), tc.differs) || !strings.Contains(err.Error(), "--"+tc.flag) {
					t.Errorf("evictd: %v, want an error naming --%s and containing %q", err, tc.flag, tc.differs)
				}
			}
		})
	}
}

// kubeletRead parses values with the type the kubelet registers for flag.
func kubeletRead(flag string, values []string) (map[string]string, error) {
	m := map[string]string{}
	var v pflag.Value = kubeletflag.NewMapStringString(&m)
	if flag == FlagEvictionHard || flag == FlagEvictionSoft {
		v = kubeletflag.NewLangleSeparatedMapStringString(&m)
	}
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(v, flag, "")
	return m, fs.Parse(flagArgs(flag, values))
}

// evictdRead parses values with evictd's flags, before Complete merges them
// with the defaults (the kubelet's types have no defaults to merge).
func evictdRead(flag string, values []string) (map[string]string, error) {
	fs := pflag.NewFlagSet("evictd", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &Config{}
	c.BindFlags(fs, fs, fs)
	if err := fs.Parse(flagArgs(flag, values)); err != nil {
		return nil, err
	}
	m := map[string]map[string]string{FlagEvictionHard: c.flags.hard, FlagEvictionSoft: c.flags.soft,
		FlagEvictionSoftGracePeriod: c.flags.grace, FlagEvictionMinimumReclaim: c.flags.minReclaim}[flag]
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}

func flagArgs(flag string, values []string) []string {
	args := make([]string, len(values))
	for i, v := range values {
		args[i] = "--" + flag + "=" + v
	}
	return args
}
