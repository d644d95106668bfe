// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/cmd/evictd/app/sandbox"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/hostpaths"
	"github.com/evictd/evictd/pkg/memhigh"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
)

// observeSynopsis names every flag of observe but --help; a test walks the
// flag set to keep it so.
const observeSynopsis = "evictd observe [--host-root DIR] [--cgroup-root PATH] [--node-cgroup PATH] [--image-fs PATH] [--container-fs PATH] [--hugepage-aware-eviction=false] [--sandbox seccomp|none] [-o json|table|observation] [-v]"

const observeUsage = `Usage: ` + observeSynopsis + `

One observation of node and pod pressure. JSON is a kubelet stats Summary;
the table is for people: node signals first, then the pods by working set,
then, on cgroup v2, the containers with memory.high set (docs/memhigh.md);
observation is the whole of what evictd acts on, the Summary with what it
has no field for (pods' ephemeral storage by part, the disk layout, the
signals that could not be read), which evictd rank --summary also takes.

Exit status: 0 when every signal was read; 1 when there is no kubepods cgroup
under the cgroup root (nothing is printed: pods' usage is unknown) or when a
node signal could not be read (the rest is printed, and each lost signal is
named on stderr); 2 for bad usage or a host root evictd cannot use.

Flags:
`

// observeFlags is the flags of `evictd observe`.
type observeFlags struct {
	hostRoot, cgroupRoot, nodeCgroup string
	imageFs, containerFs             string
	output, sandbox                  string
	verbose, help                    bool
	hugepageAware                    bool
}

func newObserveFlags() (*observeFlags, *pflag.FlagSet) {
	f := &observeFlags{}
	fs := cliflag.NewFlagSet("observe")
	fs.StringVar(&f.hostRoot, "host-root", pressure.DefaultHostRoot, "Directory under which every host path is read.")
	fs.StringVar(&f.cgroupRoot, "cgroup-root", pressure.DefaultCgroupRoot, "Cgroup under which kubepods lives (the kubelet's --cgroup-root).")
	fs.StringVar(&f.nodeCgroup, options.FlagNodeCgroup, pressure.DefaultNodeCgroup, options.NodeCgroupUsage)
	fs.StringVar(&f.imageFs, "image-fs", pressure.DefaultImageFsPath, "The container runtime's image store (imagefs).")
	fs.StringVar(&f.containerFs, "container-fs", "", "Where the runtime keeps the writable layers (containerfs), if not under --image-fs.")
	fs.BoolVar(&f.hugepageAware, config.FlagHugepageAwareEviction, true, "Take the node's hugepage pool off memory.available, as the kubelet's HugepageAwareEviction gate (on by default from 1.37); false as with the gate off.")
	fs.StringVar(&f.sandbox, options.FlagSandbox, options.SandboxSeccomp, "The sandbox observe puts its own process in before it reads the host, as evictd run's --sandbox: seccomp (open_by_handle_at and name_to_handle_at refused; observe fails when it cannot install it) or none.")
	fs.StringVarP(&f.output, "output", "o", "json", "Output format: json (a kubelet Summary), table or observation.")
	fs.BoolVarP(&f.verbose, "v", "v", false, "Log debug messages.")
	fs.BoolVarP(&f.help, flagHelp, "h", false, "Print this help and exit.")
	return f, fs
}

// observeCmd runs "evictd observe".
func observeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, fs := newObserveFlags()
	if err := fs.Parse(args); err != nil {
		return flagError(stderr, "observe", err)
	}
	if f.help {
		fmt.Fprint(stdout, observeUsage)
		fmt.Fprint(stdout, fs.FlagUsagesWrapped(helpColumns))
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "evictd observe: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if f.output != "json" && f.output != "table" && f.output != "observation" {
		fmt.Fprintf(stderr, "evictd observe: invalid --output (-o) %q: want json, table or observation\n", f.output)
		return exitUsage
	}

	// observe reads the host as evictd run does, and is run in evictd's
	// container (kubectl exec) with its capabilities: the same sandbox,
	// before the first host read.
	kind, err := sandbox.ParseKind(f.sandbox)
	if err != nil {
		fmt.Fprintf(stderr, "evictd observe: invalid --%s: %v\n", options.FlagSandbox, err)
		return exitUsage
	}
	if _, err := sandbox.Enter(kind); err != nil {
		fmt.Fprintf(stderr, "evictd observe: --%s=%s: %v (--%s=%s turns it off)\n", options.FlagSandbox, kind, err, options.FlagSandbox, options.SandboxNone)
		return exitFailure
	}

	log := cliLogger(stderr, f.verbose)
	defer func() { _ = log.Sync() }()
	o, err := pressure.NewObserver(pressure.Options{HostRoot: f.hostRoot, CgroupRoot: f.cgroupRoot, NodeCgroup: f.nodeCgroup, ImageFsPath: f.imageFs, ContainerFsPath: f.containerFs,
		NoHugepageAwareEviction: !f.hugepageAware}, log)
	if err != nil {
		fmt.Fprintf(stderr, "evictd observe: %v\n", err)
		if errors.Is(err, pressure.ErrHostRoot) || errors.Is(err, pressure.ErrInvalidOptions) {
			return exitUsage
		}
		return exitFailure
	}
	defer o.Close()
	obs, err := o.Observe(ctx)
	if err != nil {
		// ErrNoKubepods among them: a failure at run time, as the kubelet may
		// create its cgroups later; the error says where evictd looked.
		fmt.Fprintf(stderr, "evictd observe: %v\n", err)
		return exitFailure
	}
	switch f.output {
	case "json", "observation":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if f.output == "json" {
			err = enc.Encode(obs.Summary)
		} else {
			err = enc.Encode(obs)
		}
	default:
		err = writeObservationTable(stdout, obs)
		if err == nil && obs.Layout.Mode == pressure.ModeV2 {
			containers, errs := memhigh.ReadNode(obs)
			err = writeMemoryHighTable(stdout, containers)
			// A container left out is said, not failed on: memory.high
			// is no node signal.
			for _, e := range errs {
				fmt.Fprintf(stderr, "evictd observe: warning: container left out of memory.high: %v\n", e)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "evictd observe: writing output: %v\n", err)
		return exitFailure
	}
	// Said after a whole observation, not failed on: the output is complete,
	// only emptier than the node (package hostpaths).
	for _, p := range hostpaths.Check(f.hostRoot, f.imageFs, f.containerFs) {
		state := "empty"
		if p.Missing {
			state = "missing"
		}
		fmt.Fprintf(stderr, "evictd observe: warning: host directory %s is %s: unmeasured: %s; %s\n", p.Path, state, p.Loses, p.Hint)
	}
	// What was printed lacks these signals: say which and why, and fail, so
	// a script never takes a partial observation for a whole one.
	for _, se := range obs.SignalErrors {
		fmt.Fprintf(stderr, "evictd observe: %v (left out of the output)\n", se)
	}
	if len(obs.SignalErrors) > 0 {
		return exitFailure
	}
	return exitOK
}

// cliLogger logs for a person at a terminal: console format, warnings and
// up unless verbose.
func cliLogger(w io.Writer, verbose bool) *zap.Logger {
	level := zapcore.WarnLevel
	if verbose {
		level = zapcore.DebugLevel
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = ""
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), level))
}

// writeObservationTable prints node signals, then one row per pod sorted by
// working set (largest first).
func writeObservationTable(w io.Writer, obs *pressure.Observation) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	node := &obs.Summary.Node
	l := obs.Layout
	driver := string(l.Driver)
	if driver == "" {
		driver = "none (no kubepods cgroup)"
	}
	// No tab in this line: it stays out of the column widths below.
	fmt.Fprintf(tw, "NODE %s (cgroups %s, driver %s, cgroup root %s, node cgroup %s)\n", orDash(node.NodeName), l.Mode, driver, l.CgroupRoot, orDash(l.NodeCgroup))
	fmt.Fprintln(tw, "SIGNAL\tAVAILABLE\tCAPACITY\tDETAIL")
	if m := node.Memory; m != nil && m.AvailableBytes != nil {
		hugepages := ""
		if p := obs.Node.HugepagePoolBytes; p > 0 {
			hugepages = ", hugepages " + formatBytes(p) + " taken off"
		}
		fmt.Fprintf(tw, "memory.available\t%s\t%s\tworking set %s, usage %s%s\n", bytesOf(m.AvailableBytes),
			formatBytes(obs.Node.MemoryCapacityBytes), bytesOf(m.WorkingSetBytes), bytesOf(m.UsageBytes), hugepages)
	} else {
		fmt.Fprintln(tw, "memory.available\t-\t-\tunreadable (see warnings)")
	}
	if pods := podsContainer(node); pods != nil && pods.Memory != nil {
		m := pods.Memory
		swap := ""
		if pods.Swap != nil && pods.Swap.SwapUsageBytes != nil {
			swap = ", swap " + bytesOf(pods.Swap.SwapUsageBytes)
		}
		fmt.Fprintf(tw, "allocatableMemory.available\t%s\t%s\tkubepods working set %s%s\n", bytesOf(m.AvailableBytes),
			formatBytes(*m.AvailableBytes+*m.WorkingSetBytes), bytesOf(m.WorkingSetBytes), swap)
	} else {
		fmt.Fprintln(tw, "allocatableMemory.available\t-\t-\tno kubepods cgroup")
	}
	switch sw := node.Swap; {
	case sw != nil && sw.SwapAvailableBytes != nil && sw.SwapUsageBytes != nil:
		fmt.Fprintf(tw, "swap.available\t%s\t%s\tin use %s\n", bytesOf(sw.SwapAvailableBytes),
			formatBytes(*sw.SwapAvailableBytes+*sw.SwapUsageBytes), bytesOf(sw.SwapUsageBytes))
	case lostSignal(obs, "swap.available"):
		fmt.Fprintln(tw, "swap.available\t-\t-\tunreadable (see warnings)")
	default:
		fmt.Fprintln(tw, "swap.available\t-\t-\tno swap")
	}
	imageDetail, containerDetail := fsDetails(obs.Node)
	for _, f := range []struct {
		name, detail string
		fs           *statsv1alpha1.FsStats
	}{{"nodefs", obs.Node.NodeFsPath, node.Fs}, {"imagefs", imageDetail, imageFs(node)}, {"containerfs", containerDetail, containerFs(node)}} {
		if f.fs == nil {
			fmt.Fprintf(tw, "%s.available\t-\t-\tunreadable\n", f.name)
			continue
		}
		fmt.Fprintf(tw, "%s.available\t%s\t%s\t%s\n", f.name, bytesOf(f.fs.AvailableBytes), bytesOf(f.fs.CapacityBytes), f.detail)
		fmt.Fprintf(tw, "%s.inodesFree\t%s\t%s\t%s\n", f.name, countOf(f.fs.InodesFree), countOf(f.fs.Inodes), f.detail)
	}
	if r := node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		fmt.Fprintf(tw, "pid.available\t%d\t%d\t%d tasks\n", *r.MaxPID-*r.NumOfRunningProcesses, *r.MaxPID, *r.NumOfRunningProcesses)
	} else {
		fmt.Fprintln(tw, "pid.available\t-\t-\tunreadable")
	}
	for _, p := range []struct {
		name string
		psi  *statsv1alpha1.PSIStats
	}{{"memory", memPSI(node.Memory)}, {"cpu", cpuPSI(node.CPU)}, {"io", ioPSI(node.IO)}} {
		if p.psi != nil {
			fmt.Fprintf(tw, "psi.%s\t\t\t%s\n", p.name, formatPSI(p.psi))
		}
	}
	if obs.SkippedFiles > 0 {
		fmt.Fprintf(tw, "skipped\t\t\t%d unusable files, %d pods left out\n", obs.SkippedFiles, obs.SkippedPods)
	}
	fmt.Fprintln(tw)

	fmt.Fprintf(tw, "PODS (%d)\n", len(obs.Summary.Pods))
	fmt.Fprintln(tw, "UID\tPOD\tQOS\tWORKING SET\tUSAGE\tSWAP\tPROCESSES\tEPHEMERAL\tMEMORY PSI")
	order := make([]int, len(obs.Summary.Pods))
	for i := range order {
		order[i] = i
	}
	pods := obs.Summary.Pods
	sort.SliceStable(order, func(a, b int) bool {
		wa, wb := valueOf(pods[order[a]].Memory.WorkingSetBytes), valueOf(pods[order[b]].Memory.WorkingSetBytes)
		if wa != wb {
			return wa > wb
		}
		return pods[order[a]].PodRef.UID < pods[order[b]].PodRef.UID
	})
	for _, i := range order {
		p := &pods[i]
		name := "-"
		if p.PodRef.Name != "" {
			name = p.PodRef.Namespace + "/" + p.PodRef.Name
		}
		swap := "-"
		if p.Swap != nil {
			swap = bytesOf(p.Swap.SwapUsageBytes)
		}
		procs := "-"
		if p.ProcessStats != nil && p.ProcessStats.ProcessCount != nil {
			procs = strconv.FormatUint(*p.ProcessStats.ProcessCount, 10)
		}
		eph := "-"
		if p.EphemeralStorage != nil {
			eph = bytesOf(p.EphemeralStorage.UsedBytes)
			if x := obs.Pods[i].EphemeralParts; x != nil {
				// One field, so that the columns stay split by spaces.
				eph += fmt.Sprintf("(layer=%s,logs=%s,volumes=%s)", formatBytes(x.WritableLayer.Bytes), formatBytes(x.Logs.Bytes), formatBytes(x.Volumes.Bytes))
			}
		}
		psi := "-"
		if p.Memory.PSI != nil {
			psi = formatPSI(p.Memory.PSI)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.PodRef.UID, name, obs.Pods[i].QoS,
			bytesOf(p.Memory.WorkingSetBytes), bytesOf(p.Memory.UsageBytes), swap, procs, eph, psi)
	}
	return tw.Flush()
}

// writeMemoryHighTable lists the containers with memory.high set and what
// their cgroups counted since they started; the agent turns the counters
// into rates over its window (docs/memhigh.md), which one look cannot.
func writeMemoryHighTable(w io.Writer, containers []memhigh.Sample) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	set := 0
	for _, c := range containers {
		if c.HighSet {
			set++
		}
	}
	fmt.Fprintf(tw, "\nCONTAINERS WITH MEMORY.HIGH (%d of %d)\n", set, len(containers))
	fmt.Fprintln(tw, "POD UID\tCONTAINER\tMEMORY.HIGH\tHIGH EVENTS\tMAX EVENTS\tMEMORY PSI SOME avg10")
	for _, c := range containers {
		if !c.HighSet {
			continue
		}
		psi := "-"
		if c.HasPSI {
			psi = strconv.FormatFloat(c.SomeAvg10, 'f', 2, 64) + "%"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", c.PodUID, c.ContainerID[:min(12, len(c.ContainerID))], formatBytes(c.High), c.HighEvents, c.MaxEvents, psi)
	}
	return tw.Flush()
}

// lostSignal reports whether the observation could not measure the signal.
func lostSignal(obs *pressure.Observation, signal string) bool {
	for _, se := range obs.SignalErrors {
		if se.Signal == signal {
			return true
		}
	}
	return false
}

func podsContainer(n *statsv1alpha1.NodeStats) *statsv1alpha1.ContainerStats {
	for i := range n.SystemContainers {
		if n.SystemContainers[i].Name == statsv1alpha1.SystemContainerPods {
			return &n.SystemContainers[i]
		}
	}
	return nil
}

// fsDetails says, beside each filesystem's path, what the layout makes of
// it: whether the image store shares nodefs, and whose thresholds apply to
// containerfs (the kubelet's rule; containerfs has none of its own).
func fsDetails(n pressure.NodeExtras) (imagefs, containerfs string) {
	imagefs, containerfs = n.ImageFsPath, n.ContainerFsPath
	switch n.DiskLayout {
	case fslayout.OneFs:
		imagefs += " (the same filesystem as nodefs)"
	case fslayout.DedicatedImageFs:
		imagefs += " (a filesystem of its own)"
	case fslayout.SplitImageFs:
		imagefs += " (a filesystem of its own, for the images only)"
	}
	if from := fslayout.ContainerFsThresholdsFrom(n.DiskLayout); from != "" {
		containerfs += fmt.Sprintf(" (%s's filesystem: %s's thresholds apply)", from, from)
	} else if n.ContainerFsPath != n.ImageFsPath {
		containerfs += " (on neither nodefs's nor imagefs's filesystem, or unreadable)"
	}
	return imagefs, containerfs
}

func containerFs(n *statsv1alpha1.NodeStats) *statsv1alpha1.FsStats {
	if n.Runtime == nil {
		return nil
	}
	return n.Runtime.ContainerFs
}

func imageFs(n *statsv1alpha1.NodeStats) *statsv1alpha1.FsStats {
	if n.Runtime == nil {
		return nil
	}
	return n.Runtime.ImageFs
}

func memPSI(m *statsv1alpha1.MemoryStats) *statsv1alpha1.PSIStats {
	if m == nil {
		return nil
	}
	return m.PSI
}

func cpuPSI(c *statsv1alpha1.CPUStats) *statsv1alpha1.PSIStats {
	if c == nil {
		return nil
	}
	return c.PSI
}

func ioPSI(c *statsv1alpha1.IOStats) *statsv1alpha1.PSIStats {
	if c == nil {
		return nil
	}
	return c.PSI
}

func formatPSI(p *statsv1alpha1.PSIStats) string {
	return fmt.Sprintf("some avg10=%.2f full avg10=%.2f", p.Some.Avg10, p.Full.Avg10)
}

func valueOf(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func bytesOf(p *uint64) string {
	if p == nil {
		return "-"
	}
	return formatBytes(*p)
}

func countOf(p *uint64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatUint(*p, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatBytes prints a byte count with a binary unit, as kubectl quantities read.
func formatBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return strconv.FormatUint(b, 10) + "B"
	}
	v := float64(b)
	for _, u := range []string{"Ki", "Mi", "Gi", "Ti", "Pi"} {
		v /= unit
		if v < unit || u == "Pi" {
			return strconv.FormatFloat(v, 'f', 1, 64) + u
		}
	}
	return strconv.FormatUint(b, 10) + "B"
}
