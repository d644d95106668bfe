// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/fslayout"
	"github.com/evictd/evictd/pkg/pressure"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// rankSynopsis names every flag of rank but --help; a test walks the flag
// set to keep it so.
const rankSynopsis = "evictd rank --summary FILE --pods FILE [--signal SIGNAL] [--config FILE] [--namespaces FILE] [-o json|table]"

const rankUsage = `Usage: ` + rankSynopsis + `

Ranks a node's pods the way evictd would evict them under one signal, from
files captured on a cluster:

  kubectl get --raw /api/v1/nodes/NODE/proxy/stats/summary > summary.json
  evictd observe -o observation > obs.json   # on the node, in evictd's pod
  kubectl get pods -A --field-selector spec.nodeName=NODE -o json > pods.json
  kubectl get namespaces -o json > namespaces.json   # only for namespaceSelector groups

--summary takes either of the first two: a kubelet stats Summary or the
output of evictd observe -o observation. Given an evictd observation (a top-level
"summary", with "pods" and "node" beside it), the disk signals count each
pod's writable layer, logs and volumes and the node's disk layout as evictd
measured them; given a Summary, they are told from its containers' rootfs
and logs, its volumes and its filesystems' sizes.

Eligible pods come first, in eviction order, then the ineligible ones.

Flags:
`

// rankFlags is the flags of `evictd rank`.
type rankFlags struct {
	captureFiles
	signal, output string
	help           bool
}

func newRankFlags() (*rankFlags, *pflag.FlagSet) {
	f := &rankFlags{}
	fs := cliflag.NewFlagSet("rank")
	f.captureFiles.bind(fs, "EvictdConfiguration file (priority groups, exclusions).")
	fs.StringVar(&f.signal, "signal", string(thresholds.MemoryAvailable), "Eviction signal to rank for.")
	fs.StringVarP(&f.output, "output", "o", "table", "Output format: json or table.")
	fs.BoolVarP(&f.help, flagHelp, "h", false, "Print this help and exit.")
	return f, fs
}

// rankCmd runs `evictd rank`: pure ranking of captured data, no cluster access.
func rankCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	f, fs := newRankFlags()
	if err := fs.Parse(args); err != nil {
		return flagError(stderr, "rank", err)
	}
	if f.help {
		fmt.Fprint(stdout, rankUsage)
		fmt.Fprint(stdout, fs.FlagUsagesWrapped(helpColumns))
		return exitOK
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "evictd rank: %v\n", err)
		return exitUsage
	}
	if err := f.captureFiles.check(fs); err != nil {
		return fail(err)
	}
	switch {
	case f.output != "json" && f.output != "table":
		return fail(fmt.Errorf("invalid --output (-o) %q: want json or table", f.output))
	}
	signal, err := thresholds.ParseSignal(f.signal)
	if err != nil {
		return fail(fmt.Errorf("--signal: %w", err))
	}
	c, err := loadCapture("rank", f.captureFiles, stderr)
	if err != nil {
		return fail(err)
	}

	res := rank.Rank(signal, c.summary.summary, c.pods, c.opts)
	if f.output == "json" {
		err = writeJSON(stdout, res)
	} else {
		err = writeTable(stdout, signal, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "evictd rank: writing output: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// captureFiles are the files rank and explain read: a node's captured
// data and the configuration to judge it with.
type captureFiles struct {
	summary, pods, config, namespaces string
}

func (f *captureFiles) bind(fs *pflag.FlagSet, configWhat string) {
	fs.StringVar(&f.summary, "summary", "", "Kubelet stats Summary or evictd observation JSON (required).")
	fs.StringVar(&f.pods, "pods", "", "v1.PodList JSON, as kubectl get pods -o json prints it (required).")
	fs.StringVar(&f.config, "config", "", configWhat)
	fs.StringVar(&f.namespaces, "namespaces", "", "v1.NamespaceList JSON, for priority groups with a namespaceSelector.")
}

// check refuses stray arguments and missing files.
func (f captureFiles) check(fs *pflag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case f.summary == "":
		return errors.New("--summary FILE is required")
	case f.pods == "":
		return errors.New("--pods FILE is required")
	}
	return nil
}

// capture is what captureFiles hold, read and checked.
type capture struct {
	cfg     *config.Config
	opts    rank.Options
	summary summaryInput
	pods    []*v1.Pod
}

// loadCapture reads the files; warnings go to stderr, named by command.
func loadCapture(command string, f captureFiles, stderr io.Writer) (capture, error) {
	c := capture{cfg: config.Default()}
	var err error
	if f.config != "" {
		if c.cfg, err = config.Load(f.config); err != nil {
			return c, err
		}
	}
	if c.opts, err = c.cfg.RankOptions(); err != nil {
		return c, err
	}
	if c.summary, err = readSummary(f.summary); err != nil {
		return c, err
	}
	c.summary.apply(&c.opts)
	if c.pods, err = readPods(f.pods); err != nil {
		return c, err
	}
	if f.namespaces != "" {
		if c.opts.NamespaceLabels, err = readNamespaceLabels(f.namespaces); err != nil {
			return c, err
		}
	} else if c.cfg.HasSelectors() {
		fmt.Fprintf(stderr, "evictd %s: warning: namespaceSelectors (priority groups, optOut) match nothing without --namespaces\n", command)
	}
	if lost := c.summary.lostSignals; len(lost) > 0 {
		// Still worth reading: a lost signal is a node-level figure, and
		// the pods' own figures are all there.
		fmt.Fprintf(stderr, "evictd %s: warning: --summary %s: evictd could not measure %s; the observation lacks them\n",
			command, f.summary, strings.Join(lost, ", "))
	}
	return c, nil
}

func readJSONFile(path, what string, v any) error {
	data, err := readFile(path, what)
	if err != nil {
		return err
	}
	return decodeJSON(data, path, what, v)
}

func readFile(path, what string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return data, nil
}

func decodeJSON(data []byte, path, what string, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s %s: not valid JSON: %w", what, path, err)
	}
	return nil
}

// summaryWant ends the errors about a --summary file of the wrong kind.
const summaryWant = "want a kubelet stats Summary (/api/v1/nodes/NODE/proxy/stats/summary) or evictd observe -o observation"

// summaryInput is what a --summary file gives the ranking.
type summaryInput struct {
	summary *statsapi.Summary
	// diskParts and diskLayout were measured by evictd: set only from an
	// observation (diskParts then non-nil); a Summary leaves the ranking to
	// tell them from its own figures.
	diskParts  map[string]rank.DiskParts
	diskLayout fslayout.Layout
	// lostSignals are the node signals evictd could not measure, each
	// named once.
	lostSignals []string
}

// apply sets what the file measured, and only that: options from elsewhere
// stay as they are.
func (in summaryInput) apply(opts *rank.Options) {
	if in.diskParts != nil {
		opts.DiskParts = in.diskParts
		opts.DiskLayout = in.diskLayout
	}
}

// readSummary reads a kubelet stats Summary or an evictd observation.
func readSummary(path string) (summaryInput, error) {
	data, err := readFile(path, "--summary")
	if err != nil {
		return summaryInput{}, err
	}
	// The two share top-level "node" and "pods" of different shapes, and
	// one decoded as the other succeeds with empty figures; a top-level
	// "summary", even null, is only in an observation.
	var probe struct {
		Summary json.RawMessage `json:"summary"`
	}
	if err := decodeJSON(data, path, "--summary", &probe); err != nil {
		return summaryInput{}, err
	}
	if probe.Summary != nil {
		return decodeObservation(data, path)
	}
	s, err := decodeSummary(data, path)
	return summaryInput{summary: s}, err
}

func decodeSummary(data []byte, path string) (*statsapi.Summary, error) {
	// Node as a pointer tells a Summary from some other JSON document.
	var raw struct {
		Node *statsapi.NodeStats `json:"node"`
		Pods []statsapi.PodStats `json:"pods"`
	}
	if err := decodeJSON(data, path, "--summary", &raw); err != nil {
		return nil, err
	}
	if raw.Node == nil {
		return nil, fmt.Errorf("--summary %s: no \"node\" object; %s", path, summaryWant)
	}
	return &statsapi.Summary{Node: *raw.Node, Pods: raw.Pods}, nil
}

// observationDoc is the part of a pressure.Observation that rank uses.
// Signal errors are read by name alone: pressure.SignalError writes its
// cause as a string it cannot read back.
type observationDoc struct {
	Summary      *statsapi.Summary    `json:"summary"`
	Pods         []pressure.PodExtras `json:"pods"`
	Node         pressure.NodeExtras  `json:"node"`
	SignalErrors []struct {
		Signal string `json:"signal"`
	} `json:"signalErrors"`
}

func decodeObservation(data []byte, path string) (summaryInput, error) {
	var doc observationDoc
	if err := decodeJSON(data, path, "--summary", &doc); err != nil {
		return summaryInput{}, err
	}
	if doc.Summary == nil {
		return summaryInput{}, fmt.Errorf("--summary %s: \"summary\" is null; %s", path, summaryWant)
	}
	if err := checkLayout(doc.Node.DiskLayout); err != nil {
		return summaryInput{}, fmt.Errorf("--summary %s: %w", path, err)
	}
	obs := &pressure.Observation{Summary: doc.Summary, Pods: doc.Pods, Node: doc.Node}
	in := summaryInput{
		summary:    doc.Summary,
		diskParts:  rank.DiskPartsOf(obs),
		diskLayout: doc.Node.DiskLayout,
	}
	seen := map[string]bool{}
	for _, se := range doc.SignalErrors {
		if !seen[se.Signal] {
			seen[se.Signal] = true
			in.lostSignals = append(in.lostSignals, strconv.Quote(se.Signal))
		}
	}
	return in, nil
}

// checkLayout rejects a layout this evictd does not know: the ranking would
// take it for one filesystem, which is a guess the file did not make.
func checkLayout(l fslayout.Layout) error {
	switch l {
	case fslayout.Unknown, fslayout.OneFs, fslayout.DedicatedImageFs, fslayout.SplitImageFs:
		return nil
	}
	return fmt.Errorf("node.diskLayout %q: want %s, %s, %s or none", l, fslayout.OneFs, fslayout.DedicatedImageFs, fslayout.SplitImageFs)
}

func readPods(path string) ([]*v1.Pod, error) {
	var list v1.PodList
	if err := readJSONFile(path, "--pods", &list); err != nil {
		return nil, err
	}
	switch {
	case list.Kind == "" && list.Items == nil:
		return nil, fmt.Errorf("--pods %s: no \"items\"; want a PodList (kubectl get pods -o json)", path)
	case list.Kind != "" && list.Kind != "List" && list.Kind != "PodList":
		return nil, fmt.Errorf("--pods %s: kind %q; want a PodList (kubectl get pods -o json)", path, list.Kind)
	}
	pods := make([]*v1.Pod, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if p.Kind != "" && p.Kind != "Pod" {
			return nil, fmt.Errorf("--pods %s: items[%d] has kind %q; want Pod", path, i, p.Kind)
		}
		pods = append(pods, p)
	}
	return pods, nil
}

func readNamespaceLabels(path string) (map[string]map[string]string, error) {
	var list v1.NamespaceList
	if err := readJSONFile(path, "--namespaces", &list); err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(list.Items))
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.Kind != "" && ns.Kind != "Namespace" {
			return nil, fmt.Errorf("--namespaces %s: items[%d] has kind %q; want Namespace", path, i, ns.Kind)
		}
		out[ns.Name] = ns.Labels
	}
	return out, nil
}

func writeJSON(w io.Writer, res any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func writeTable(w io.Writer, signal thresholds.Signal, res rank.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// The swap column only where some pod uses swap, the stall column only
	// under a stall signal: every other table reads as before.
	swap := false
	for _, c := range res.Candidates {
		swap = swap || c.Swap > 0
	}
	extra := ""
	if swap {
		extra += "\tSWAP"
	}
	if signal.Stall() {
		extra += "\tOWN STALL"
	}
	fmt.Fprintf(tw, "RANK\tPOD\tPRIORITY\tEFFECTIVE\tUSAGE%s\tREQUEST\tEXCEEDS\tSKIP REASON\n", extra)
	n := 0
	for _, c := range res.Candidates {
		pos := "-"
		if c.Eligible {
			n++
			pos = strconv.Itoa(n)
		}
		usage := "-"
		if c.HasUsage {
			usage = formatAmount(signal, c.Usage)
		}
		exceeds := "no"
		if c.ExceedsRequest {
			exceeds = "yes"
		}
		cols := ""
		if swap {
			cols += "\t" + formatAmount(signal, c.Swap)
		}
		if signal.Stall() {
			cols += "\t" + strconv.FormatFloat(c.Stall*100, 'f', 1, 64) + "%"
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%d\t%d\t%s%s\t%s\t%s\t%s\n", pos, c.Namespace, c.Name,
			c.Priority, c.EffectivePriority, usage, cols, formatAmount(signal, c.Request), exceeds, c.SkipReason)
	}
	return tw.Flush()
}

// formatAmount prints bytes the way Kubernetes quantities read (512Mi) and
// counts (inodes, processes) as plain numbers.
func formatAmount(signal thresholds.Signal, v int64) string {
	switch signal.Resource() {
	case string(v1.ResourceMemory), string(v1.ResourceEphemeralStorage):
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return strconv.FormatInt(v, 10)
}
