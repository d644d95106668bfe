// SPDX-License-Identifier: Apache-2.0

// Package evictdproc runs `evictd run` as a real process for the
// end-to-end tests and the demo, and reads back what it reports: its JSON
// log lines, its /metrics and /healthz, and its resident memory and CPU time
// from /proc.
package evictdproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/evictd/evictd/internal/metrictest"
	"github.com/evictd/evictd/test/internal/proc"
	"github.com/evictd/evictd/test/nodesim"
)

// Process is a running evictd.
type Process struct {
	args    []string
	p       *proc.Proc
	logPath string
	logFile *os.File
	addr    string
	client  *http.Client
}

// Options say how to start evictd.
type Options struct {
	// Bin is the evictd binary.
	Bin string
	// Args follow "run"; Start adds --log-format=json and
	// --metrics-bind-address.
	Args []string
	// LogPath receives evictd's stdout and stderr (its log).
	LogPath string
	// Env is added to this process's environment (KEY=VALUE), e.g. the
	// GOMEMLIMIT a container of the chart gets.
	Env []string
	// CgroupProcs are cgroup.procs files evictd joins before it execs, so
	// that every page it touches is charged to those cgroups from the first
	// one, as in a container (see nodesim.JoinArgs).
	CgroupProcs []string
}

// Start starts evictd on a free loopback port for /metrics.
func Start(o Options) (*Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	e := &Process{logPath: o.LogPath, logFile: f, addr: "127.0.0.1:" + strconv.Itoa(port),
		client: &http.Client{Timeout: 5 * time.Second}}
	e.args = append([]string{"run", "--log-format=json", "--metrics-bind-address=" + e.addr}, o.Args...)
	cmd := exec.Command(o.Bin, e.args...)
	if len(o.CgroupProcs) > 0 {
		cmd = exec.Command("/bin/sh", nodesim.JoinArgs(o.CgroupProcs, append([]string{o.Bin}, e.args...)...)...)
	}
	if len(o.Env) > 0 {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if e.p, err = proc.Start(cmd, clock.RealClock{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", o.Bin, err)
	}
	return e, nil
}

// Args are the arguments evictd was started with.
func (e *Process) Args() []string { return e.args }

// Pid is the process id.
func (e *Process) Pid() int { return e.p.Pid() }

// Addr is host:port of /metrics, /healthz and /readyz.
func (e *Process) Addr() string { return e.addr }

// LogPath is the log file.
func (e *Process) LogPath() string { return e.logPath }

// Exited reports whether the process has ended.
func (e *Process) Exited() bool { return e.p.Exited() }

// WaitReady waits until /readyz answers 200, failing early if evictd exits.
func (e *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if e.p.Exited() {
			return false, errors.New("evictd exited")
		}
		return e.Get(ctx, "/readyz") == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("evictd not ready on %s: %w; log:\n%s", e.addr, err, e.Tail(30))
	}
	return nil
}

// Get requests path on the metrics address and returns the HTTP status,
// or 0 when there is no answer.
func (e *Process) Get(ctx context.Context, path string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+path, nil)
	if err != nil {
		return 0
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Stop sends SIGTERM and waits up to grace for evictd to exit, then kills
// it. It returns whether SIGKILL was needed and the exit code.
func (e *Process) Stop(grace time.Duration) (killed bool, exitCode int, err error) {
	defer e.logFile.Close()
	killed = e.p.Stop(grace)
	state, _, werr := e.p.Result()
	if state == nil {
		return killed, -1, werr
	}
	return killed, state.ExitCode(), nil
}

// Tail is the last n lines of the log.
func (e *Process) Tail(n int) string {
	b, err := os.ReadFile(e.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Entry is one line of evictd's JSON log.
type Entry struct {
	TS     time.Time
	Level  string
	Msg    string
	Pod    string
	Signal string
	Reason string
	Fields map[string]any
	Raw    string
}

// Str is a string field of the entry, or "".
func (l Entry) Str(key string) string {
	s, _ := l.Fields[key].(string)
	return s
}

// Num is a numeric field of the entry and whether it was there.
func (l Entry) Num(key string) (float64, bool) {
	v, ok := l.Fields[key].(float64)
	return v, ok
}

// ParseLine reads one log line. A line that is not JSON (a panic, a stray
// print) becomes an entry with Level "unparsed" and Msg the raw text, so it
// is never silently lost.
func ParseLine(line string) Entry {
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return Entry{Msg: line, Level: "unparsed", Raw: line}
	}
	l := Entry{Fields: m, Raw: line}
	l.Level, _ = m["level"].(string)
	l.Msg, _ = m["msg"].(string)
	l.Pod, _ = m["pod"].(string)
	l.Signal, _ = m["signal"].(string)
	l.Reason, _ = m["reason"].(string)
	if ts, ok := m["ts"].(string); ok {
		l.TS, _ = time.Parse(time.RFC3339Nano, ts)
	}
	return l
}

// Logs parses every line evictd has written so far.
func (e *Process) Logs() ([]Entry, error) {
	f, err := os.Open(e.logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	_, err = ReadEntries(f, func(l Entry) { out = append(out, l) })
	return out, err
}

// ReadEntries calls fn for every complete line of r and returns how many
// bytes it consumed; a trailing partial line is left for the next call.
func ReadEntries(r io.Reader, fn func(Entry)) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var n int64
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		n += int64(len(line))
		if s := strings.TrimSpace(line); s != "" {
			fn(ParseLine(s))
		}
	}
}

// Metrics is one scrape of /metrics.
type Metrics map[string]*dto.MetricFamily

// Scrape reads /metrics in the Prometheus text format.
func (e *Process) Scrape(ctx context.Context) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape evictd /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape evictd /metrics: HTTP %d", resp.StatusCode)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads metrics in the Prometheus text format, as /metrics
// serves them.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse evictd /metrics: %w", err)
	}
	return mfs, nil
}

// Lookup adds up the series of family name whose labels include every pair
// of want (nil: all its series): counter, gauge and untyped values, the
// sample counts of histograms and summaries.
//
// A family that is not in the scrape, or that has no series matching want,
// is an error naming the family and the labels and listing what is there,
// never a 0: a test that wants a counter at 0 must not pass because the
// metric was renamed or a label changed. evictd creates the series of its
// closed label sets at 0 up front (pkg/metrics, InitSignals), so those are
// there before the first event. A polling loop that waits for a series to
// appear takes the error as "not yet" and reports the last one if it times
// out.
func (m Metrics) Lookup(name string, want map[string]string) (float64, error) {
	mf, ok := m[name]
	if !ok {
		return 0, m.missingFamily(name)
	}
	total, n := 0.0, 0
	for _, s := range mf.GetMetric() {
		if !hasLabels(s, want) {
			continue
		}
		n++
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			total += s.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			total += s.GetGauge().GetValue()
		case dto.MetricType_UNTYPED:
			total += s.GetUntyped().GetValue()
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			total += float64(s.GetHistogram().GetSampleCount())
		case dto.MetricType_SUMMARY:
			total += float64(s.GetSummary().GetSampleCount())
		default:
			return 0, fmt.Errorf("%s is of type %s, which Lookup cannot read", name, mf.GetType())
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no series with labels %s; its series: %s", name, metrictest.Selector(want), seriesList(mf))
	}
	return total, nil
}

// Value is Lookup for a test: a missing family or series fails it at once
// (t.Fatal) with Lookup's error.
func (m Metrics) Value(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	v, err := m.Lookup(name, want)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Sum is Lookup for a caller with no test to fail and no use for the error
// (the demo's display): a missing family or series reads as NaN, not 0, so
// that a check `Sum(...) != 0` fails after a rename. An ordered comparison
// with NaN is always false, though: a test reads with Value.
func (m Metrics) Sum(name string, want map[string]string) float64 {
	v, err := m.Lookup(name, want)
	if err != nil {
		return math.NaN()
	}
	return v
}

// Evictions is evictd_evictions_total for one result, over all signals, as
// Sum reads it (NaN when there is no such series).
func (m Metrics) Evictions(result string) float64 {
	return m.Sum("evictd_evictions_total", map[string]string{"result": result})
}

// hasLabels reports whether s carries every label of want. As in PromQL, a
// label "" is an absent one.
func hasLabels(s *dto.Metric, want map[string]string) bool {
	have := labelMap(s)
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func labelMap(s *dto.Metric) map[string]string {
	have := map[string]string{}
	for _, l := range s.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	return have
}

// missingFamily names the families of name's namespace (up to its first
// "_"): the likely rename. The rest (go_, process_) would only be noise.
func (m Metrics) missingFamily(name string) error {
	prefix, _, _ := strings.Cut(name, "_")
	var near []string
	for f := range m {
		if strings.HasPrefix(f, prefix+"_") {
			near = append(near, f)
		}
	}
	if len(near) == 0 {
		return fmt.Errorf("no metric family %s in the scrape (%d families, none named %s_*)", name, len(m), prefix)
	}
	sort.Strings(near)
	return fmt.Errorf("no metric family %s in the scrape; the %s_* families: %s", name, prefix, strings.Join(near, ", "))
}

func seriesList(mf *dto.MetricFamily) string {
	if len(mf.GetMetric()) == 0 {
		return "none"
	}
	out := make([]string, len(mf.GetMetric()))
	for i, s := range mf.GetMetric() {
		out[i] = mf.GetName() + metrictest.Selector(labelMap(s))
	}
	return strings.Join(out, " ")
}

// FreePort asks the kernel for a free loopback port. It is released before
// evictd binds it; the window is short.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Usage is what a process cost: its resident set (VmRSS), the part of it
// locked in RAM (VmLck: mlockall's pages, charged to its memory cgroup like
// any other and never reclaimable) and CPU time (utime+stime).
type Usage struct {
	RSS    float64 // bytes
	Locked float64 // bytes
	CPU    time.Duration
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// ReadUsage reads /proc/PID/status and /proc/PID/stat under procRoot.
func ReadUsage(procRoot string, pid int) (Usage, error) {
	dir := procRoot + "/" + strconv.Itoa(pid)
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return Usage{}, err
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Usage{}, err
	}
	rss, err := statusKB(status, "VmRSS")
	if err != nil {
		return Usage{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	locked, err := statusKB(status, "VmLck")
	if err != nil {
		return Usage{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	cpu, err := cpuTime(stat)
	if err != nil {
		return Usage{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	return Usage{RSS: rss, Locked: locked, CPU: cpu}, nil
}

// statusKB parses the line key of /proc/PID/status, "VmRSS:   12345 kB",
// into bytes.
func statusKB(status []byte, key string) (float64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("malformed %q", line)
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("malformed %q: %w", line, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s line", key)
}

// cpuTime is utime+stime. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func cpuTime(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' closing the command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// After the name come state (field 3) ... utime (14) and stime (15).
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q or stime %q is not a number", f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}
