// SPDX-License-Identifier: Apache-2.0

package memlock

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/pkg/metrics"
)

// TestLockReports: whatever mlockall answers, evictd goes on; the log says
// in one line what happened and, for a refusal, what to grant, and
// evictd_memory_locked says whether the memory is locked.
func TestLockReports(t *testing.T) {
	tests := []struct {
		name      string
		wanted    bool
		lockErr   error
		wantLevel zapcore.Level
		wantGauge float64
		wantText  []string // in the log line's message, reason or err
	}{
		{"locked", true, nil, zapcore.InfoLevel, 1, []string{"memory locked"}},
		{"turned off", false, nil, zapcore.InfoLevel, 0, []string{"turned off"}},
		{"no capability, no allowance", true, syscall.EPERM, zapcore.WarnLevel, 0, []string{"IPC_LOCK", "RLIMIT_MEMLOCK is 0", "operation not permitted"}},
		{"mappings above RLIMIT_MEMLOCK", true, syscall.ENOMEM, zapcore.WarnLevel, 0, []string{"IPC_LOCK", "RLIMIT_MEMLOCK", "cannot allocate memory"}},
		{"kernel before MCL_ONFAULT", true, syscall.EINVAL, zapcore.WarnLevel, 0, []string{"MCL_ONFAULT", "4.4", "invalid argument"}},
		{"wrapped errno", true, fmt.Errorf("mlockall: %w", syscall.ENOMEM), zapcore.WarnLevel, 0, []string{"IPC_LOCK"}},
		{"not Linux", true, errors.ErrUnsupported, zapcore.WarnLevel, 0, []string{"Linux only"}},
		{"anything else", true, syscall.EAGAIN, zapcore.WarnLevel, 0, []string{"unexpectedly", "resource temporarily unavailable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			res := Lock(tc.wanted, func() error { calls++; return tc.lockErr })
			if wantCalls := map[bool]int{true: 1, false: 0}[tc.wanted]; calls != wantCalls {
				t.Errorf("lock called %d times, want %d", calls, wantCalls)
			}
			if res.Locked != (tc.wanted && tc.lockErr == nil) {
				t.Errorf("Locked = %v", res.Locked)
			}

			core, logs := observer.New(zapcore.DebugLevel)
			m, err := metrics.New(buildinfo.Info{Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			m.SetMemoryLocked(true) // Report must set it either way
			res.Report(zap.New(core), m)

			if n := logs.Len(); n != 1 {
				t.Fatalf("%d log lines, want 1: %v", n, logs.All())
			}
			e := logs.All()[0]
			if e.Level != tc.wantLevel {
				t.Errorf("level %v, want %v", e.Level, tc.wantLevel)
			}
			text := e.Message
			for k, v := range e.ContextMap() {
				text += fmt.Sprintf(" %s=%v", k, v)
			}
			for _, w := range tc.wantText {
				if !strings.Contains(text, w) {
					t.Errorf("log line %q lacks %q", text, w)
				}
			}
			if got := gaugeValue(t, m, "evictd_memory_locked"); got != tc.wantGauge {
				t.Errorf("evictd_memory_locked = %v, want %v", got, tc.wantGauge)
			}
		})
	}
}

// gaugeValue gathers the registry and returns the value of the one series
// of a gauge family.
func gaugeValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single-series gauge %s gathered", name)
	return 0
}
