// SPDX-License-Identifier: Apache-2.0

package config_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/golden"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/config"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/thresholds"
)

var configDocPath = filepath.Join("..", "..", "docs", "config.md")

const regenerate = "go test ./pkg/config -run TestConfigDoc -update"

// field documents one field of the file: its default (empty: none, or the
// type's zero), the `evictd run` flag that overrides it, and what it does.
type field struct{ def, flag, help string }

// fields documents every field of config.Config and config.PriorityGroup,
// by the name the file spells it; TestConfigDoc fails on a field missing
// here or named here and not in the types.
var fields = map[string]field{
	"apiVersion": {help: "`" + config.APIVersion + "`, exactly; required."},
	"kind":       {help: "`" + config.Kind + "`, exactly; required."},
	"evictionHard": {def: thresholds.JoinStatements(config.DefaultEvictionHard()), flag: config.FlagEvictionHard,
		help: "Hard thresholds, signal to `500Mi`, `10%` or `none`: they act at once. A signal not named keeps its default; `none` switches one off. `allocatableMemory.available` follows `memory.available`, as in the kubelet. The memory stall signals take a share: `memory.pressureSome: 40%` ([stall.md](stall.md))."},
	"evictionSoft": {flag: config.FlagEvictionSoft,
		help: "Soft thresholds, as `evictionHard`: they act once they have held for their grace period. Each needs one in `evictionSoftGracePeriod`."},
	"evictionSoftGracePeriod": {flag: config.FlagEvictionSoftGracePeriod,
		help: "Signal to a duration (`1m30s`): how long a soft threshold must hold before it acts."},
	"evictionMinimumReclaim": {flag: config.FlagEvictionMinimumReclaim,
		help: "Signal to a quantity or percentage: once a threshold acts, evictd keeps evicting until available is at least threshold + reclaim."},
	"evictionMaxPodGracePeriod": {def: "0", flag: config.FlagEvictionMaxPodGrace,
		help: "Cap, in seconds, on the grace period of a pod evicted for a soft threshold; 0 gives each pod its own `terminationGracePeriodSeconds`. Not negative."},
	"evictionPressureTransitionPeriod": {def: config.DefaultPressureTransitionPeriod.String(), flag: config.FlagEvictionPressureTransPer,
		help: "How long a pressure condition stays after its thresholds cleared. Not negative."},
	"evictionStallWindow": {def: config.DefaultStallWindow.String(), flag: config.FlagEvictionStallWindow,
		help: fmt.Sprintf("The window the memory stall signals measure the share of time stalled over, within %s..%s.", config.MinStallWindow, config.MaxStallWindow)},
	"memoryHighEviction": {def: "false", flag: config.FlagMemoryHighEviction,
		help: "Evict the pod of a container stuck at its `memory.high` (cgroup v2; [memhigh.md](memhigh.md)). The five `memoryHigh*` fields after it tune it and are refused without it."},
	"memoryHighEventRate": {def: fmt.Sprint(config.DefaultMemoryHighEventRate), flag: config.FlagMemoryHighEventRate,
		help: "`memory.events` high per second over the window above which a container is over; 0 leaves this signal out."},
	"memoryHighMaxEventRate": {def: fmt.Sprint(config.DefaultMemoryHighMaxEventRate), flag: config.FlagMemoryHighMaxRate,
		help: "`memory.events` max per second over the window; 0 leaves this signal out."},
	"memoryHighPressureSome": {def: config.DefaultMemoryHighPressureSome, flag: config.FlagMemoryHighPressure,
		help: "Share of the window the container's tasks stalled on memory (`memory.pressure` some), a percentage below 100%; `0%` leaves this signal out. One of the three signals must stay in."},
	"memoryHighWindow": {def: config.DefaultMemoryHighWindow.String(), flag: config.FlagMemoryHighWindow,
		help: fmt.Sprintf("What the rates and share are measured over, within %s..%s.", config.MinStallWindow, config.MaxStallWindow)},
	"memoryHighGracePeriod": {def: config.DefaultMemoryHighGracePeriod.String(), flag: config.FlagMemoryHighGracePeriod,
		help: "How long a container must stay over before its pod is evicted."},
	"evictionRequest": {def: "false", flag: config.FlagEvictionRequest,
		help: "Ask for soft evictions with a `lifecycle.k8s.io/v1alpha1` EvictionRequest, so that the pod's eviction responders can act ([evictionrequest.md](evictionrequest.md))."},
	"evictionRequestResponderWait": {def: config.DefaultEvictionRequestResponderWait.String(), flag: config.FlagEvictionRequestWait,
		help: fmt.Sprintf("How long a responder has before evictd evicts through the Eviction API itself, within %s..%s.", config.MinEvictionRequestResponderWait, config.MaxEvictionRequestResponderWait)},
	"priorityGroups": {
		help: "Groups of namespaces whose pods' priorities are offset, or fenced ([decide.md](decide.md), *Priority and priority groups*). For a namespace matched only by selectors, the first matching group wins; a namespace listed by name is in one group only."},
	"excludedNamespaces": {
		help: "Namespaces never evicted from."},
	"optOut":            {help: "Who may keep their pods from evictd with the `evictd.io/evict: \"false\"` annotation; nobody by default, and an annotated pod elsewhere is evicted like any other ([decide.md](decide.md), *The opt-out annotation*). Needs `namespaces` or a `namespaceSelector`."},
	"optOut.namespaces": {help: "Namespaces whose pods may opt out, by name."},
	"optOut.namespaceSelector": {
		help: "Namespaces whose pods may opt out, by their labels (`evictd rank` and `explain` need `--namespaces` for it); `{}` matches every namespace. Only who may label namespaces should be able to grant it."},
	"includeDaemonSetPods": {def: "false", flag: options.FlagIncludeDaemonSetPods,
		help: "Make DaemonSet pods eligible; by default they are skipped, for their controller recreates them on the same node."},
	"swapInRanking": {def: "true", flag: options.FlagSwapInRanking,
		help: "Rank pods for the memory signals by working set + swap; `false` by working set alone, as the kubelet. Changes nothing on a node without swap."},
	"hugepageAwareEviction": {def: "true", flag: config.FlagHugepageAwareEviction,
		help: "Take the node's hugepage pool off `memory.available` and its capacity, as the kubelet's `HugepageAwareEviction` gate (on by default from 1.37); `false` for a kubelet with the gate off."},

	"priorityGroups[].name": {help: "The group's name; required, unique."},
	"priorityGroups[].namespaces": {
		help: "Namespaces in the group, by name."},
	"priorityGroups[].namespaceSelector": {
		help: "Namespaces in the group, by their labels (`evictd rank` and `explain` need `--namespaces` for it). A group needs `namespaces` or a `namespaceSelector`."},
	"priorityGroups[].offset": {def: "0",
		help: "Added to the group's pods' priorities, clamped to the int32 range."},
	"priorityGroups[].fence": {def: "false",
		help: "The group's pods' own priorities stop counting outside the group: from outside they all look like `offset`; inside it they still order each other."},
}

// badFiles are files evictd refuses, each shown in the doc with the error
// it prints; TestConfigDoc decodes each, so the doc shows the real line.
var badFiles = []string{
	"kind: KubeletConfiguration",
	"evictionHrad: {memory.available: 500Mi}",
	"evictionHard: {memory.available: 500Mi, memory.available: 1Gi}",
	"evictionHard: {memory.available: 500MB}",
	"evictionSoft: {memory.available: 1Gi}",
	"evictionMaxPodGracePeriod: -1",
	"evictionStallWindow: 10m",
	"memoryHighWindow: 1m",
	"evictionRequestResponderWait: 2h",
	"excludedNamespaces: [Kube_System]",
	"optOut: {}",
	"optOut: {namespaces: [team-a, team-a]}",
	"priorityGroups: [{name: batch}]",
	"priorityGroups: [{name: batch, namespaces: [batch], offset: 99999999999}]",
	"priorityGroups: [{name: batch, namespaces: [batch, no]}]",
}

const header = "apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\n"

// TestConfigDoc keeps docs/config.md's generated tables, between their
// markers, equal to the config types and the errors evictd prints.
func TestConfigDoc(t *testing.T) {
	doc, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatalf("read %s: %v", configDocPath, err)
	}
	out := doc
	for _, part := range []struct {
		name string
		text []byte
	}{{"fields", fieldTable(t)}, {"errors", errorTable(t)}} {
		begin, end := "<!-- "+part.name+":begin -->\n", "<!-- "+part.name+":end -->\n"
		b, e := bytes.Index(out, []byte(begin)), bytes.Index(out, []byte(end))
		if b < 0 || e < b {
			t.Fatalf("%s lacks the %q ... %q markers", configDocPath, begin, end)
		}
		got := out[b+len(begin) : e]
		if !golden.Update() && !bytes.Equal(got, part.text) {
			t.Errorf("the %s table of %s is out of date; regenerate it with:\n  %s\nwant:\n%s", part.name, configDocPath, regenerate, part.text)
		}
		out = append(append(append([]byte{}, out[:b+len(begin)]...), part.text...), out[e:]...)
	}
	if golden.Update() {
		if err := os.WriteFile(configDocPath, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fieldTable is the table of every field, walked from the types.
func fieldTable(t *testing.T) []byte {
	runFlags := &cliflag.Sections{}
	options.NewOptions().AddFlags(runFlags)
	all := runFlags.FlagSet("run")
	var b bytes.Buffer
	b.WriteString("| Field | Type | Default | Flag | Meaning |\n|---|---|---|---|---|\n")
	seen := map[string]bool{}
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			sf := typ.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			key := prefix + name
			seen[key] = true
			f, ok := fields[key]
			if !ok {
				t.Errorf("field %s (%s) is not documented: add it to fields in %s", key, sf.Name, "pkg/config/doc_test.go")
				continue
			}
			flagCell := ""
			if f.flag != "" {
				if all.Lookup(f.flag) == nil {
					t.Errorf("field %s: evictd run has no flag --%s", key, f.flag)
				}
				flagCell = "`--" + f.flag + "`"
			}
			def := f.def
			if def != "" {
				def = "`" + def + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", key, typeName(t, sf.Type), def, flagCell, f.help)
			if sf.Type == reflect.TypeOf([]config.PriorityGroup{}) {
				walk(key+"[].", sf.Type.Elem())
			}
			if sf.Type == reflect.TypeOf(&config.OptOut{}) {
				walk(key+".", sf.Type.Elem())
			}
		}
	}
	walk("", reflect.TypeOf(config.Config{}))
	for k := range fields {
		if !seen[k] {
			t.Errorf("fields documents %s, which the types do not have", k)
		}
	}
	return b.Bytes()
}

// typeName says what a field's value is in the file.
func typeName(t *testing.T, typ reflect.Type) string {
	switch typ {
	case reflect.TypeOf(config.SignalMap{}):
		return "map of signal to string"
	case reflect.TypeOf(&metav1.Duration{}):
		return "duration (`1m30s`)"
	case reflect.TypeOf(&metav1.LabelSelector{}):
		return "label selector"
	case reflect.TypeOf([]config.PriorityGroup{}):
		return "list of groups"
	case reflect.TypeOf(&config.OptOut{}):
		return "object"
	case reflect.TypeOf([]string{}):
		return "list of strings"
	}
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int32:
		return "integer"
	case reflect.Float64:
		return "number"
	}
	t.Errorf("type %s has no name for the doc: add it to typeName", typ)
	return typ.String()
}

// errorTable is each bad file with the error evictd gives for it.
func errorTable(t *testing.T) []byte {
	var b bytes.Buffer
	b.WriteString("| The file has | evictd says |\n|---|---|\n")
	for _, bad := range badFiles {
		file := header + bad
		if strings.HasPrefix(bad, "kind:") {
			file = "apiVersion: " + config.APIVersion + "\n" + bad
		}
		_, err := config.Decode([]byte(file))
		if err == nil {
			t.Errorf("%q: accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error on more than one line: %q", bad, err)
		}
		fmt.Fprintf(&b, "| `%s` | `%s` |\n", codeCell(bad), codeCell(err.Error()))
	}
	return b.Bytes()
}

// codeCell keeps text in a code span of a table cell: newlines become
// spaces, and "|" would end the cell.
func codeCell(s string) string {
	return strings.ReplaceAll(regexp.MustCompile(`\s*\n\s*`).ReplaceAllString(strings.TrimSpace(s), " "), "|", `\|`)
}

// TestExampleInDocsMatchesTestdata keeps docs/config.md's example equal to
// testdata/full.yaml, which TestLoadFullExample loads, and full.yaml naming
// every field of the types, as it says it does.
func TestExampleInDocsMatchesTestdata(t *testing.T) {
	doc, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("testdata", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("```yaml\n"+string(example)+"```\n")) {
		t.Errorf("%s does not show pkg/config/testdata/full.yaml verbatim, as one yaml block", configDocPath)
	}
	var named map[string]any
	if err := yaml.Unmarshal(example, &named); err != nil {
		t.Fatal(err)
	}
	if o, ok := named["optOut"].(map[string]any); ok {
		for k := range o {
			named["optOut."+k] = true
		}
	}
	groups, _ := named["priorityGroups"].([]any)
	for _, g := range groups {
		for k := range g.(map[string]any) {
			named["priorityGroups[]."+k] = true
		}
	}
	for k := range fields {
		if _, ok := named[k]; !ok {
			t.Errorf("testdata/full.yaml does not set %s", k)
		}
	}
}
