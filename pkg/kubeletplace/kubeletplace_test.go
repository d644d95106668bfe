// SPDX-License-Identifier: Apache-2.0

package kubeletplace

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/healthz"
	"github.com/evictd/evictd/pkg/kubeletcfg"
	"github.com/evictd/evictd/pkg/kubeletplace/kubelettest"
	"github.com/evictd/evictd/pkg/kubeletwatch"
	"github.com/evictd/evictd/pkg/metrics"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

func TestPlaceAboveKubelet(t *testing.T) {
	caps := map[thresholds.Signal]thresholds.Observation{
		thresholds.MemoryAvailable: {Capacity: 4 << 30},
		thresholds.PIDAvailable:    {Capacity: 100000},
	}
	t.Run("defaults move", func(t *testing.T) {
		o := kubelettest.Options(t, kubelettest.Root(t))
		m, _ := metrics.New(buildinfo.Info{})
		core, logs := observer.New(zap.InfoLevel)
		st := PlaceAbove(o, View{Signals: caps}, zap.New(core), m)
		if got := o.Config.EvictionHard; got["memory.available"] != "950Mi" || got["allocatableMemory.available"] != "950Mi" ||
			got["pid.available"] != "10%" || got["nodefs.available"] != "15%" {
			t.Errorf("thresholds %v: want memory and allocatable at 950Mi (750Mi + 200Mi), pid.available 10%% (over 5%% + 5), nodefs 15%%", got)
		}
		if st.Detail() != "" || !st.Known {
			t.Errorf("detail %q, known %v", st.Detail(), st.Known)
		}
		line := logs.FilterMessage("evictd's hard thresholds placed above the kubelet's").All()
		if len(line) != 1 {
			t.Fatalf("start line: %v", logs.All())
		}
		f := line[0].ContextMap()
		if !strings.Contains(f["kubeletFrom"].(string), "kubelet pid 640") || f["kubelet"] != "memory.available<750Mi,pid.available<5%" || f["moved"] != int64(1) {
			t.Errorf("start line fields %v", f)
		}
		assertValue(t, m, "evictd_kubelet_thresholds_known", nil, 1)
		assertValue(t, m, "evictd_kubelet_threshold_available_bytes", map[string]string{"signal": "memory.available"}, 750<<20)
		assertValue(t, m, "evictd_kubelet_threshold_available", map[string]string{"signal": "pid.available"}, 5000)
		assertValue(t, m, "evictd_threshold_below_kubelet", map[string]string{"signal": "memory.available"}, 0)
		ths, _ := o.Config.Thresholds()
		if ths[0].Signal != thresholds.MemoryAvailable || ths[0].Value.String() != "950Mi" {
			t.Errorf("the loop's first threshold %v", ths[0])
		}
	})
	t.Run("an operator's value at or below warns", func(t *testing.T) {
		o := kubelettest.Options(t, kubelettest.Root(t), "--eviction-hard=memory.available<600Mi")
		m, _ := metrics.New(buildinfo.Info{})
		core, logs := observer.New(zap.InfoLevel)
		st := PlaceAbove(o, View{Signals: caps}, zap.New(core), m)
		if o.Config.EvictionHard["memory.available"] != "600Mi" {
			t.Errorf("the operator's memory.available moved to %s", o.Config.EvictionHard["memory.available"])
		}
		if d := st.Detail(); !strings.Contains(d, "memory.available<600Mi (kubelet 750Mi)") {
			t.Errorf("readiness detail %q", d)
		}
		if n := logs.FilterField(zap.String("signal", "memory.available")).FilterLevelExact(zap.WarnLevel).Len(); n != 1 {
			t.Errorf("%d warnings for memory.available: %v", n, logs.All())
		}
		assertValue(t, m, "evictd_threshold_below_kubelet", map[string]string{"signal": "memory.available"}, 1)
		assertValue(t, m, "evictd_threshold_below_kubelet", map[string]string{"signal": "allocatableMemory.available"}, 1)
		var got []string
		st.EmitBelow(func(ref v1.ObjectReference, typ, reason, _, note string) {
			got = append(got, ref.Kind+"/"+ref.Name+" "+typ+" "+reason+" "+note)
		}, "n1")
		if len(got) != 1 || !strings.HasPrefix(got[0], "Node/n1 Warning "+ReasonThresholdBelowKubelet) || !strings.Contains(got[0], "600Mi") {
			t.Errorf("events %q", got)
		}
	})
	// The README's example values against the kubelet's defaults: the
	// disk threshold at the kubelet's is in time (the kubelet deletes
	// images first there), so nothing is flagged and
	// EvictdThresholdBelowKubelet stays quiet; one below it is flagged.
	t.Run("the README's example values are not flagged", func(t *testing.T) {
		root := kubelettest.Root(t)
		if err := os.WriteFile(filepath.Join(root, "var/lib/kubelet/config.yaml"), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			hard   string
			nodefs float64
		}{{"memory.available<500Mi,nodefs.available<10%", 0}, {"memory.available<500Mi,nodefs.available<9%", 1}} {
			o := kubelettest.Options(t, root, "--eviction-hard="+c.hard)
			m, _ := metrics.New(buildinfo.Info{})
			st := PlaceAbove(o, View{Signals: caps}, zap.NewNop(), m)
			if (st.Detail() == "") != (c.nodefs == 0) {
				t.Errorf("%s: readiness detail %q", c.hard, st.Detail())
			}
			assertValue(t, m, "evictd_threshold_below_kubelet", map[string]string{"signal": "memory.available"}, 0)
			assertValue(t, m, "evictd_threshold_below_kubelet", map[string]string{"signal": "nodefs.available"}, c.nodefs)
		}
	})
	t.Run("unknown keeps the defaults", func(t *testing.T) {
		root := kubelettest.Root(t)
		// The kubelet's directory is not mounted into evictd's pod.
		if err := os.RemoveAll(filepath.Join(root, "var/lib/kubelet")); err != nil {
			t.Fatal(err)
		}
		o := kubelettest.Options(t, root)
		m, _ := metrics.New(buildinfo.Info{})
		core, logs := observer.New(zap.InfoLevel)
		st := PlaceAbove(o, View{Signals: caps}, zap.New(core), m)
		if o.Config.EvictionHard["memory.available"] != "300Mi" || st.Known {
			t.Errorf("memory.available %s, known %v", o.Config.EvictionHard["memory.available"], st.Known)
		}
		if !strings.Contains(st.Detail(), "unknown") {
			t.Errorf("detail %q", st.Detail())
		}
		w := logs.FilterLevelExact(zap.WarnLevel).All()
		if len(w) != 1 || !strings.Contains(w[0].ContextMap()["fix"].(string), "mount /var/lib/kubelet read-only") {
			t.Errorf("warnings %v", w)
		}
		assertValue(t, m, "evictd_kubelet_thresholds_known", nil, 0)
		assertValue(t, m, "evictd_kubelet_thresholds_unknown", map[string]string{"reason": "not-mounted"}, 1)
	})
	t.Run("ignore", func(t *testing.T) {
		o := kubelettest.Options(t, kubelettest.Root(t), "--kubelet-thresholds=ignore")
		m, _ := metrics.New(buildinfo.Info{})
		st := PlaceAbove(o, View{Signals: caps}, zap.NewNop(), m)
		if o.Config.EvictionHard["memory.available"] != "300Mi" || st.Known || st.Detail() != "" {
			t.Errorf("ignore: memory.available %s, state %+v", o.Config.EvictionHard["memory.available"], st)
		}
	})
}

func TestKubeletFlagsValidate(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"--kubelet-thresholds=above", `invalid --kubelet-thresholds "above": want place or ignore`},
		{"--kubelet-config=etc/kubelet.yaml", `invalid --kubelet-config "etc/kubelet.yaml": want an absolute path`},
	} {
		o := options.NewOptions()
		sections := &cliflag.Sections{}
		o.AddFlags(sections)
		if err := sections.FlagSet("t").Parse([]string{"--node-name=n1", c.arg}); err != nil {
			t.Fatal(err)
		}
		if err := o.Complete(); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.arg, err, c.want)
		}
	}
}

// assertValue checks a gauge's or a counter's value (metrictest.Value).
func assertValue(t *testing.T, m *metrics.Metrics, name string, labels map[string]string, want float64) {
	t.Helper()
	if got := metrictest.Value(t, m.Registry(), name, labels); got != want {
		t.Errorf("%s%s = %g, want %g", name, metrictest.Selector(labels), got, want)
	}
}

// TestKubeletPlacerRestart: each kubelet restart is read again and
// evictd's defaults placed from scratch above it (up, then down again), the
// loop handed the new thresholds and the change logged; a restart whose
// read fails keeps what was placed and warns in readiness and the metric.
func TestKubeletPlacerRestart(t *testing.T) {
	root := kubelettest.Root(t)
	kubelettest.SetKubelet(t, root, 640, 1000, "  memory.available: 750Mi\n  pid.available: 5%\n")
	o := kubelettest.Options(t, root)
	m, _ := metrics.New(buildinfo.Info{})
	core, logs := observer.New(zap.InfoLevel)
	caps := map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Capacity: 4 << 30}, thresholds.PIDAvailable: {Capacity: 100000}}
	p := NewPlacer(o, View{Signals: caps}, zap.New(core), m)
	var handed [][]thresholds.Threshold
	p.Retune = func(ths []thresholds.Threshold, _ trace.Placement) { handed = append(handed, ths) }
	p.View = func() View { return View{Signals: caps} }
	if o.Config.EvictionHard["memory.available"] != "950Mi" {
		t.Fatalf("at start: memory.available<%s, want 950Mi", o.Config.EvictionHard["memory.available"])
	}
	proc, _ := kubeletwatch.Find(filepath.Join(root, "proc"), nil)
	w := kubeletwatch.New(filepath.Join(root, "proc"), proc)
	restart := func(pid int, start uint64, hard string) {
		t.Helper()
		kubelettest.SetKubelet(t, root, pid, start, hard)
		prev := w.Last()
		changed, now, err := w.Check()
		if err != nil || !changed {
			t.Fatalf("restart to pid %d: changed %v, err %v", pid, changed, err)
		}
		p.checked(prev, now, changed)
	}
	memory := func(ths []thresholds.Threshold) string {
		for _, th := range ths {
			if th.Signal == thresholds.MemoryAvailable && th.Hard() {
				return th.Value.String()
			}
		}
		return ""
	}

	restart(641, 2000, "  memory.available: 1Gi\n")
	if len(handed) != 1 || memory(handed[0]) != "1224Mi" {
		t.Fatalf("after a restart with 1Gi: handed %v, want memory.available<1224Mi (1Gi + 200Mi)", handed)
	}
	again := logs.FilterMessage("evictd read the kubelet's thresholds again").All()
	if len(again) != 1 || !strings.Contains(fmt.Sprint(again[0].ContextMap()["changed"]), "memory.available<950Mi -> memory.available<1224Mi") ||
		!strings.Contains(again[0].ContextMap()["why"].(string), "kubelet pid 641") {
		t.Errorf("the re-read's line: %v", again)
	}
	assertValue(t, m, "evictd_kubelet_restarts_total", nil, 1)
	assertValue(t, m, "evictd_kubelet_threshold_available_bytes", map[string]string{"signal": "memory.available"}, 1<<30)

	// Down again: from evictd's own default, not from what was placed.
	restart(641, 3000, "  memory.available: 50Mi\n")
	if len(handed) != 2 || memory(handed[1]) != "300Mi" {
		t.Errorf("after a restart with 50Mi: handed %v, want evictd's default memory.available<300Mi back", handed)
	}
	// The first kubelet's pid.available is no longer exported after a
	// kubelet without it.
	metrictest.Absent(t, m.Registry(), "evictd_kubelet_threshold_available", map[string]string{"signal": "pid.available"})

	// A read that fails: the thresholds stay, readiness and the metric say so.
	restart(642, 4000, "  memory.available: 1Gi\n")
	if err := os.Remove(filepath.Join(root, "var/lib/kubelet/config.yaml")); err != nil {
		t.Fatal(err)
	}
	restart(643, 5000, "")
	if len(handed) != 3 {
		t.Errorf("a failed read handed the loop new thresholds: %v", handed[2:])
	}
	if d := p.Detail(); !strings.Contains(d, "unknown since its restart, evictd keeps those placed above its last reading") {
		t.Errorf("readiness detail %q", d)
	}
	assertValue(t, m, "evictd_kubelet_thresholds_known", nil, 0)
	assertValue(t, m, "evictd_kubelet_restarts_total", nil, 4)
}

// TestKubeletPlacerCapacityUnknown: a kubelet percentage against evictd's
// memory quantity with no capacity observed is not compared: readiness
// warns and the metric says 0; once a pass has observed the capacity, the
// next check places, and the warning goes.
func TestKubeletPlacerCapacityUnknown(t *testing.T) {
	root := kubelettest.Root(t)
	kubelettest.SetKubelet(t, root, 640, 1000, "  memory.available: 20%\n")
	o := kubelettest.Options(t, root)
	m, _ := metrics.New(buildinfo.Info{})
	p := NewPlacer(o, View{}, zap.NewNop(), m)
	var handed [][]thresholds.Threshold
	p.Retune = func(ths []thresholds.Threshold, _ trace.Placement) { handed = append(handed, ths) }
	view := View{}
	p.View = func() View { return view }
	if d := p.Detail(); !strings.Contains(d, "not compared with the kubelet's, the capacity unknown") || !strings.Contains(d, "memory.available<300Mi (kubelet 20%)") {
		t.Errorf("readiness detail %q", d)
	}
	assertValue(t, m, "evictd_kubelet_threshold_compared", map[string]string{"signal": "memory.available"}, 0)
	// A warning, not a failure: evictd protects the node at its own
	// thresholds meanwhile.
	ready := healthz.New("readyz")
	ready.AddWarning(Check, p.Detail)
	rec := httptest.NewRecorder()
	ready.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz?verbose", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "[+]kubelet-thresholds ok: not compared with the kubelet's") {
		t.Errorf("/readyz?verbose: %d %q", rec.Code, rec.Body.String())
	}
	proc := kubeletwatch.Process{PID: 640, Start: 1000}
	p.checked(proc, proc, false)
	if len(handed) != 0 {
		t.Errorf("placed again with the capacity still unknown: %v", handed)
	}
	view = View{Signals: map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Capacity: 4 << 30}}}
	p.checked(proc, proc, false)
	if len(handed) != 1 || handed[0][0].Value.String() != "1020Mi" {
		t.Errorf("with 4Gi observed: handed %v, want memory.available<1020Mi (20%% of 4Gi + 200Mi, rounded up)", handed)
	}
	if d := p.Detail(); d != "" {
		t.Errorf("readiness detail %q once compared", d)
	}
	assertValue(t, m, "evictd_kubelet_threshold_compared", map[string]string{"signal": "memory.available"}, 1)
}

// TestKubeletPlacerRetry: a read that fails is tried again with back-off,
// without a kubelet restart, until one succeeds: the kubelet's config is
// missing at start (its directory is there: /readyz names that cause, not a
// mount), and is back a while later. The tries come on the checks after
// each back-off (a fake clock): none before the first is due, a failing
// one that repeats the error at info (warned once), the one after the file
// is back places evictd's thresholds above the kubelet's, and the
// warning, the metric's reason and the tries end.
func TestKubeletPlacerRetry(t *testing.T) {
	root := kubelettest.Root(t)
	kubelettest.SetKubelet(t, root, 640, 1000, "  memory.available: 750Mi\n")
	cfg := filepath.Join(root, "var/lib/kubelet/config.yaml")
	saved, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	o := kubelettest.Options(t, root)
	m, _ := metrics.New(buildinfo.Info{})
	core, logs := observer.New(zap.InfoLevel)
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	caps := map[thresholds.Signal]thresholds.Observation{thresholds.MemoryAvailable: {Capacity: 4 << 30}}
	p := NewPlacerLogging(o, View{Signals: caps}, zap.New(core), m, NewImpostorLog(zap.New(core)), clk)
	var handed [][]thresholds.Threshold
	p.Retune = func(ths []thresholds.Threshold, _ trace.Placement) { handed = append(handed, ths) }
	p.View = func() View { return View{Signals: caps} }

	d := p.Detail()
	if !strings.Contains(d, "the kubelet's thresholds are unknown, evictd keeps its defaults (missing)") || strings.Contains(d, "mount /") ||
		!strings.Contains(d, "nothing to mount") {
		t.Errorf("readiness detail %q: want the reason missing, and no mount advised (the directory is there)", d)
	}
	assertValue(t, m, "evictd_kubelet_thresholds_known", nil, 0)

	kubelet := kubeletwatch.Process{PID: 640, Start: 1000}
	tries := func() int { return logs.FilterMessage("evictd read the kubelet's thresholds again").Len() }
	check := func(after time.Duration) {
		t.Helper()
		clk.Step(after)
		p.checked(kubelet, kubelet, false)
	}
	check(RetryInitial/2 - time.Second)
	if n := tries(); n != 0 {
		t.Fatalf("%d tries before the first back-off (at least %v) was over", n, RetryInitial/2)
	}
	// The first wait is within [RetryInitial/2, RetryInitial].
	check(RetryInitial)
	if n := tries(); n != 1 {
		t.Fatalf("%d tries after the first back-off, want 1: %v", n, logs.All())
	}
	if got := logs.FilterMessage("evictd read the kubelet's thresholds again").All()[0].ContextMap()["why"]; got != "try 2 after a failed read (missing)" {
		t.Errorf("the try's why: %v", got)
	}
	if n := logs.FilterLevelExact(zap.WarnLevel).Len(); n != 1 || logs.FilterMessage("the kubelet's eviction thresholds are still unknown").Len() != 1 {
		t.Errorf("the same failure again: %d warnings, want the first only, and the try at info: %v", n, logs.All())
	}
	assertValue(t, m, "evictd_kubelet_thresholds_unknown", map[string]string{"reason": "missing"}, 1)
	// The second wait is within [RetryInitial, 2*RetryInitial].
	check(RetryInitial - time.Second)
	if n := tries(); n != 1 {
		t.Errorf("%d tries before the second back-off was over, want 1", n)
	}
	if err := os.WriteFile(cfg, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	check(RetryInitial + time.Second)
	if n := tries(); n != 2 {
		t.Fatalf("%d tries after the second back-off, want 2", n)
	}
	if len(handed) != 1 || handed[0][0].Value.String() != "950Mi" {
		t.Errorf("after the config came back: handed %v, want memory.available<950Mi (750Mi + 200Mi), without a kubelet restart", handed)
	}
	if d := p.Detail(); d != "" {
		t.Errorf("readiness detail %q once known", d)
	}
	assertValue(t, m, "evictd_kubelet_thresholds_known", nil, 1)
	metrictest.Absent(t, m.Registry(), "evictd_kubelet_thresholds_unknown", map[string]string{"reason": "missing"})
	check(RetryMax * 2)
	if n := tries(); n != 2 {
		t.Errorf("%d tries once the read succeeded, want no more", n)
	}
}

// TestFixNamesTheCause: the advice on /readyz and in the log names what
// failed: a mount only for a directory that is not visible, the
// capability or the flag for a relative path, the group for a hidden /proc.
func TestFixNamesTheCause(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&kubeletcfg.NotVisibleError{Path: "/etc/k/kubelet.yaml", Dir: "/etc/k"}, "mount /etc/k read-only"},
		{&kubeletcfg.NotVisibleError{Path: "/etc/k/kubelet.yaml", Dir: "/etc/k", DirVisible: true}, "nothing to mount"},
		{&kubeletcfg.RelativePathError{Flag: "--config", Path: "k.yaml", PID: 4}, "give --kubelet-config=PATH"},
		{&kubeletcfg.RelativePathError{Flag: "--config-dir", Path: "d", PID: 4}, "start the kubelet with an absolute --config-dir"},
		{&kubeletcfg.HiddenError{Proc: "/host/proc", Why: "hidepid"}, "supplementalGroups"},
		{&kubeletcfg.InvalidError{Err: errors.New("bad")}, "correct the file or flag named"},
		{kubeletcfg.ErrNotFound, "--kubelet-thresholds=ignore"},
	} {
		got := Fix(c.err)
		if !strings.Contains(got, c.want) {
			t.Errorf("Fix(%v) = %q, want it to say %q", c.err, got, c.want)
		}
		if c.want == "nothing to mount" && strings.Contains(got, "mount /") {
			t.Errorf("Fix(%v) = %q advises a mount", c.err, got)
		}
	}
}
