package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/pkg/thresholds"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

const rankUsage = `Usage: evictd rank --summary FILE --pods FILE [--signal SIGNAL] [--config FILE] [--namespaces FILE] [-o json|table]

Ranks a node's pods the way evictd would evict them under one signal, from
files captured on a cluster:

  kubectl get --raw /api/v1/nodes/NODE/proxy/stats/summary > summary.json
  kubectl get pods -A --field-selector spec.nodeName=NODE -o json > pods.json
  kubectl get namespaces -o json > namespaces.json   # only for namespaceSelector groups

Eligible pods come first, in eviction order, then the ineligible ones.

Flags:
`

// rankCmd runs `evictd rank`: pure ranking of captured data, no cluster access.
func rankCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rank", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), rankUsage)
		fs.PrintDefaults()
	}
	summaryPath := fs.String("summary", "", "kubelet stats Summary JSON (required)")
	podsPath := fs.String("pods", "", "v1.PodList JSON, as kubectl get pods -o json prints it (required)")
	signalName := fs.String("signal", string(thresholds.MemoryAvailable), "eviction signal to rank for")
	configPath := fs.String("config", "", "EvictdConfiguration file (priority groups, exclusions)")
	nsPath := fs.String("namespaces", "", "v1.NamespaceList JSON, for priority groups with a namespaceSelector")
	output := fs.String("o", "table", "output format: json or table")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "evictd rank: %v\n", err)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	case *summaryPath == "":
		return fail(errors.New("--summary FILE is required"))
	case *podsPath == "":
		return fail(errors.New("--pods FILE is required"))
	case *output != "json" && *output != "table":
		return fail(fmt.Errorf("-o %q: want json or table", *output))
	}
	signal, err := thresholds.ParseSignal(*signalName)
	if err != nil {
		return fail(fmt.Errorf("--signal: %w", err))
	}
	cfg := config.Default()
	if *configPath != "" {
		if cfg, err = config.Load(*configPath); err != nil {
			return fail(err)
		}
	}
	opts, err := cfg.RankOptions()
	if err != nil {
		return fail(err)
	}
	summary, err := readSummary(*summaryPath)
	if err != nil {
		return fail(err)
	}
	pods, err := readPods(*podsPath)
	if err != nil {
		return fail(err)
	}
	if *nsPath != "" {
		if opts.NamespaceLabels, err = readNamespaceLabels(*nsPath); err != nil {
			return fail(err)
		}
	} else if cfg.HasSelectors() {
		fmt.Fprintln(stderr, "evictd rank: warning: priority groups with a namespaceSelector match nothing without --namespaces")
	}

	res := rank.Rank(signal, summary, pods, opts)
	if *output == "json" {
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

func readJSONFile(path, what string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s %s: not valid JSON: %w", what, path, err)
	}
	return nil
}

func readSummary(path string) (*statsapi.Summary, error) {
	// Node as a pointer tells a Summary from some other JSON document.
	var raw struct {
		Node *statsapi.NodeStats `json:"node"`
		Pods []statsapi.PodStats `json:"pods"`
	}
	if err := readJSONFile(path, "--summary", &raw); err != nil {
		return nil, err
	}
	if raw.Node == nil {
		return nil, fmt.Errorf("--summary %s: no \"node\" object; want a kubelet stats Summary (/api/v1/nodes/NODE/proxy/stats/summary)", path)
	}
	return &statsapi.Summary{Node: *raw.Node, Pods: raw.Pods}, nil
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

func writeJSON(w io.Writer, res rank.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func writeTable(w io.Writer, signal thresholds.Signal, res rank.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "RANK\tPOD\tPRIORITY\tEFFECTIVE\tUSAGE\tREQUEST\tEXCEEDS\tSKIP REASON\n")
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
		fmt.Fprintf(tw, "%s\t%s/%s\t%d\t%d\t%s\t%s\t%s\t%s\n", pos, c.Namespace, c.Name,
			c.Priority, c.EffectivePriority, usage, formatAmount(signal, c.Request), exceeds, c.SkipReason)
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
