// SPDX-License-Identifier: Apache-2.0

package thresholds

import (
	"strings"
	"testing"
)

// TestKubeletSettings holds the settings the kubelet's parser
// (ParseThresholdConfig in pkg/kubelet/eviction/helpers.go, v1.37) takes and
// evictd once refused with a message that did not say what the kubelet does
// with them. Each is now either taken with the kubelet's meaning, or refused
// with an error that states it (docs/decide.md, "Where evictd differs").
func TestKubeletSettings(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		// want lists each threshold as String() prints it, in order.
		want    []string
		wantErr []string
	}{
		{
			// parsePercentage reads these as 0; the kubelet keeps a
			// threshold of 0, met only by a reading below zero.
			name: "a percentage the kubelet reads as 0 is off, like 0%",
			spec: Spec{Hard: map[string]string{"nodefs.available": "0.0%", "memory.available": "-0%", "pid.available": "1e-50%", "imagefs.available": "10%"}},
			want: []string{"imagefs.available<10%"},
		},
		{
			name: "its grace period and minimum reclaim go with it",
			spec: Spec{
				Hard:           map[string]string{"nodefs.available": "0.00%"},
				Soft:           map[string]string{"memory.available": "0e3%"},
				GracePeriod:    map[string]string{"memory.available": "1m"},
				MinimumReclaim: map[string]string{"nodefs.available": "1Gi"},
			},
			want: nil,
		},
		{
			name: "so does a grace period of 0s, which the kubelet takes",
			spec: Spec{Soft: map[string]string{"memory.available": "0.0%"}, GracePeriod: map[string]string{"memory.available": "0s"}},
			want: nil,
		},
		{
			// parsePercentage trims every trailing %.
			name: "10%% is 10%, as in the kubelet",
			spec: Spec{Hard: map[string]string{"nodefs.available": "10%%"}, MinimumReclaim: map[string]string{"nodefs.available": "5%%"}},
			want: []string{"nodefs.available<10% (min-reclaim 5%)"},
		},
		{
			// The kubelet's float32 reads it as 100%, a threshold always
			// met, as 100.0% is for both.
			name: "a percentage the kubelet rounds to 100% is 100%",
			spec: Spec{Hard: map[string]string{"memory.available": "100.000001%"}},
			want: []string{"memory.available<100%"},
		},
		{
			name: "a quantity below 1n is 1n, as ParseQuantity rounds it",
			spec: Spec{Hard: map[string]string{"memory.available": "1e-40", "pid.available": "5e-300"}},
			want: []string{"memory.available<1e-9", "pid.available<1e-9"},
		},
		{
			name: "a zero minimum reclaim with a large exponent is none",
			spec: Spec{Hard: map[string]string{"memory.available": "1Gi"}, MinimumReclaim: map[string]string{"memory.available": "0e200"}},
			want: []string{"memory.available<1Gi"},
		},
		{
			name:    "NaN% threshold",
			spec:    Spec{Hard: map[string]string{"memory.available": "NaN%"}},
			wantErr: []string{"eviction-hard: memory.available<NaN%", "the kubelet takes it", "depends on the CPU", "write 0% to switch the threshold off"},
		},
		{
			name:    "NaN% minimum reclaim",
			spec:    Spec{Hard: map[string]string{"memory.available": "1Gi"}, MinimumReclaim: map[string]string{"memory.available": "nan%"}},
			wantErr: []string{"eviction-minimum-reclaim: memory.available", "the kubelet takes it", "in effect no minimum reclaim"},
		},
		{
			name:    "threshold beyond int64",
			spec:    Spec{Hard: map[string]string{"memory.available": "10E"}},
			wantErr: []string{"memory.available<10E", "the kubelet takes it as a threshold always met", "until no pod it may evict is left"},
		},
		{
			name:    "threshold with a large exponent",
			spec:    Spec{Soft: map[string]string{"nodefs.available": "1e40"}, GracePeriod: map[string]string{"nodefs.available": "1m"}},
			wantErr: []string{"eviction-soft: nodefs.available<1e40", "the kubelet takes it as a threshold always met"},
		},
		{
			name:    "threshold with a huge exponent",
			spec:    Spec{Hard: map[string]string{"nodefs.available": "1e999999999"}},
			wantErr: []string{"nodefs.available<1e999999999", "the kubelet takes it as a threshold always met"},
		},
		{
			name:    "minimum reclaim beyond int64",
			spec:    Spec{Hard: map[string]string{"memory.available": "1Gi"}, MinimumReclaim: map[string]string{"memory.available": "1e40"}},
			wantErr: []string{"eviction-minimum-reclaim: memory.available", "a threshold it has acted on then never clears"},
		},
		{
			name:    "minimum reclaim above 100%",
			spec:    Spec{Hard: map[string]string{"nodefs.available": "10%"}, MinimumReclaim: map[string]string{"nodefs.available": "150%"}},
			wantErr: []string{"eviction-minimum-reclaim: nodefs.available", "above 100%", "a threshold it has acted on then never clears"},
		},
		{
			name:    "quantity longer than 64 characters",
			spec:    Spec{Hard: map[string]string{"memory.available": strings.Repeat("0", 70) + "1Gi"}},
			wantErr: []string{"longer than 64 characters", "the kubelet reads the number it spells"},
		},
		{
			// isHardEvictionThreshold: GracePeriod == 0.
			name:    "a soft grace period of 0s",
			spec:    Spec{Soft: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "0s"}},
			wantErr: []string{"eviction-soft-grace-period: memory.available=0s", "the kubelet makes such a soft threshold a hard one", "set it in eviction-hard"},
		},
		{
			name:    "a grace period with no soft threshold",
			spec:    Spec{Hard: map[string]string{"memory.available": "1Gi"}, GracePeriod: map[string]string{"memory.available": "1m"}},
			wantErr: []string{"memory.available has a grace period but no soft threshold", "the kubelet ignores it"},
		},
		{
			name:    "a minimum reclaim with no threshold",
			spec:    Spec{Hard: map[string]string{"memory.available": "none"}, MinimumReclaim: map[string]string{"memory.available": "100Mi"}},
			wantErr: []string{"memory.available has a minimum reclaim but no threshold", "the kubelet ignores it"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.spec)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse = %v, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Parse error = %q, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var gotS []string
			for _, th := range got {
				gotS = append(gotS, th.String())
			}
			if strings.Join(gotS, " | ") != strings.Join(tc.want, " | ") {
				t.Errorf("Parse = %q, want %q", gotS, tc.want)
			}
		})
	}
}

// TestKubeletSettingsOff: SwitchedOff, which the warning at start and the
// allocatable copy use, knows every percentage the kubelet reads as 0.
func TestKubeletSettingsOff(t *testing.T) {
	for _, raw := range []string{"0%", "100%", "0.0%", "-0%", " 00% ", "0e3%", "1e-50%", "0%%"} {
		if !SwitchedOff(MemoryAvailable, raw) {
			t.Errorf("SwitchedOff(%q) = false, want true", raw)
		}
	}
	for _, raw := range []string{"1%", "100.0%", "0.001%", "0", "none", "NaN%"} {
		if SwitchedOff(MemoryAvailable, raw) {
			t.Errorf("SwitchedOff(%q) = true, want false", raw)
		}
	}
	if SwitchedOff(MemoryPressureSome, "0.0%") {
		t.Error("a stall signal's 0.0% is off; want it left to the stall rule")
	}
}

// TestKubeletDuplicates: the kubelet's map flags keep the last value of a
// signal given twice; evictd refuses, saying so.
func TestKubeletDuplicates(t *testing.T) {
	if _, err := SplitStatements("memory.available<1Gi,memory.available<2Gi"); err == nil ||
		!strings.Contains(err.Error(), "given twice") || !strings.Contains(err.Error(), "the kubelet keeps the last one, 2Gi") {
		t.Errorf("SplitStatements error = %v, want one saying the kubelet keeps 2Gi", err)
	}
	if _, err := SplitPairs("memory.available=1m,memory.available=2m"); err == nil ||
		!strings.Contains(err.Error(), "given twice") || !strings.Contains(err.Error(), "the kubelet keeps the last one, 2m") {
		t.Errorf("SplitPairs error = %v, want one saying the kubelet keeps 2m", err)
	}
}
