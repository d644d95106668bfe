// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/test/e2e/framework"
)

// agentPod returns the rendered DaemonSet's evictd container and the pod's
// volumes by name.
func agentPod(t *testing.T, valuesYAML string) (container map[string]any, volumes map[string]map[string]any) {
	t.Helper()
	ds := find(t, mustRender(t, valuesYAML), "DaemonSet", "evictd")
	container = nested[[]any](t, ds, "spec", "template", "spec", "containers")[0].(map[string]any)
	volumes = map[string]map[string]any{}
	for _, v := range nested[[]any](t, ds, "spec", "template", "spec", "volumes") {
		volumes[v.(map[string]any)["name"].(string)] = v.(map[string]any)
	}
	return container, volumes
}

// writableMounts are the container's volumeMounts not marked readOnly.
func writableMounts(c map[string]any) []map[string]any {
	var out []map[string]any
	for _, m := range c["volumeMounts"].([]any) {
		if m.(map[string]any)["readOnly"] != true {
			out = append(out, m.(map[string]any))
		}
	}
	return out
}

func mountNamed(c map[string]any, name string) map[string]any {
	for _, m := range c["volumeMounts"].([]any) {
		if m.(map[string]any)["name"] == name {
			return m.(map[string]any)
		}
	}
	return nil
}

// TestChartActuator: actuator.enabled (off by default) passes --actuator
// and mounts the pod cgroups, and only them, writable where evictd looks
// for them under its host root, nested in the cgroup tree's read-only
// mount; off, nothing is writable. The schema keeps podCgroups under
// /sys/fs/cgroup, and --actuator in extraArgs, which would leave the mount
// read-only, is refused.
func TestChartActuator(t *testing.T) {
	c, _ := agentPod(t, "")
	if slices.Contains(c["args"].([]any), any("--actuator")) {
		t.Errorf("default values pass --actuator: %v", c["args"])
	}
	if w := writableMounts(c); len(w) != 0 {
		t.Errorf("default values mount %v writable; want every host mount read-only", w)
	}

	for values, podCgroups := range map[string]string{
		"actuator: {enabled: true}":                                                   "/sys/fs/cgroup/kubepods.slice",
		"actuator: {enabled: true, podCgroups: /sys/fs/cgroup/kubepods}":              "/sys/fs/cgroup/kubepods",
		"actuator: {enabled: true, podCgroups: /sys/fs/cgroup/memory/kubepods.slice}": "/sys/fs/cgroup/memory/kubepods.slice",
		"actuator: {enabled: true, podCgroups: /sys/fs/cgroup/memory/kubepods}":       "/sys/fs/cgroup/memory/kubepods",
	} {
		c, vols := agentPod(t, values)
		if args := c["args"].([]any); !slices.Contains(args, any("--actuator")) {
			t.Errorf("%s: args %v lack --actuator", values, args)
		}
		w := writableMounts(c)
		if len(w) != 1 {
			t.Errorf("%s: writable mounts %v; want exactly one, the pod cgroups", values, w)
			continue
		}
		if want := "/host" + podCgroups; w[0]["mountPath"] != want {
			t.Errorf("%s: writable mount at %v; want %s, where evictd reads the pod cgroups under --host-root=/host", values, w[0]["mountPath"], want)
		}
		hp, _ := vols[w[0]["name"].(string)]["hostPath"].(map[string]any)
		if hp["path"] != podCgroups || hp["type"] != "Directory" {
			t.Errorf("%s: the writable mount's volume is %v; want hostPath %s, type Directory", values, vols[w[0]["name"].(string)], podCgroups)
		}
		cg := mountNamed(c, "cgroup")
		if cg["mountPath"] != "/host/sys/fs/cgroup" || cg["readOnly"] != true || cg["recursiveReadOnly"] != "IfPossible" {
			t.Errorf("%s: the cgroup tree's mount is %v; want it read-only at /host/sys/fs/cgroup as without the actuator", values, cg)
		}
	}

	for _, bad := range []string{
		"kubepods.slice",
		"/sys/fs/cgroup",
		"/sys/fs/cgroup/",
		"/sys/fs/cgroup/kubepods.slice/",
		"/sys/fs/cgroupfs/kubepods",
		"/var/lib/kubelet",
		"/sys/fs/cgroup/../../etc",
		"/sys/fs/cgroup/kubepods/..",
		"/sys/fs/cgroup/./kubepods",
		"/sys/fs/cgroup//kubepods",
		"/sys/fs/cgroup/kube pods",
	} {
		values := `actuator: {enabled: true, podCgroups: "` + bad + `"}`
		if _, err := render(t, values); err == nil || !strings.Contains(err.Error(), "podCgroups") || !strings.Contains(err.Error(), "'"+bad+"'") {
			t.Errorf("%s: %v; want a schema error naming podCgroups and its value", values, err)
		}
	}
	if _, err := render(t, "actuator: {enabled: yes please}"); err == nil || !strings.Contains(err.Error(), "enabled") {
		t.Errorf("enabled not a boolean: %v; want a schema error naming enabled", err)
	}
	for _, arg := range []string{"--actuator", "--actuator=true"} {
		if _, err := render(t, "extraArgs: ["+arg+"]"); err == nil || !strings.Contains(err.Error(), "actuator.enabled") {
			t.Errorf("%s in extraArgs: %v; want an error pointing at actuator.enabled", arg, err)
		}
	}
}

// TestManifestActuatorCommented: deploy/daemonset.yaml carries the
// actuator commented out (the flag, the mount and the volume), and
// uncommenting those three blocks gives what the chart renders with
// actuator.enabled, so the plain manifest's opt-in cannot drift from the
// chart's.
func TestManifestActuatorCommented(t *testing.T) {
	src, err := os.ReadFile(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	uncommented, blocks := uncommentActuator(string(src))
	if blocks != 3 {
		t.Fatalf("deploy/daemonset.yaml has %d commented actuator blocks; want 3 (# - --actuator, and # - name: pod-cgroups as mount and volume)", blocks)
	}
	want, err := framework.ParseManifest(strings.NewReader(uncommented))
	if err != nil {
		t.Fatalf("deploy/daemonset.yaml with the actuator uncommented: %v", err)
	}
	equalsChart(t, want, "actuator: {enabled: true}", "deploy/daemonset.yaml with the actuator uncommented")
}

// uncommentActuator uncomments the actuator's blocks of a manifest: a line
// "# - --actuator" or "# - name: pod-cgroups", and the commented lines
// indented under it. It returns the text and the number of blocks.
func uncommentActuator(manifest string) (string, int) {
	return uncommentBlocks(manifest, "# - --actuator", "# - name: pod-cgroups")
}

// uncommentBlocks uncomments the blocks of a manifest that start with one
// of the lines heads (its text, indentation aside) and go on with the
// commented lines at the same indentation under it ("#   ..."). It returns
// the text and the number of blocks.
func uncommentBlocks(manifest string, heads ...string) (string, int) {
	lines := strings.Split(manifest, "\n")
	blocks, inBlock, blockIndent := 0, false, ""
	for i, l := range lines {
		text := strings.TrimLeft(l, " ")
		indent := l[:len(l)-len(text)]
		switch {
		case slices.Contains(heads, text):
			blocks++
			inBlock, blockIndent = true, indent
			lines[i] = indent + strings.TrimPrefix(text, "# ")
		case inBlock && indent == blockIndent && strings.HasPrefix(text, "#   "):
			lines[i] = indent + strings.TrimPrefix(text, "# ")
		default:
			inBlock = false
		}
	}
	return strings.Join(lines, "\n"), blocks
}
