// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestChartKubeletConfig: kubeletConfig.hostPath mounts the kubelet's
// config directory read-only where evictd reads it under its host root,
// kubeletConfig.file and thresholds become their flags, and the defaults
// add neither (the manifest's defaults have none).
func TestChartKubeletConfig(t *testing.T) {
	c, vols := agentPod(t, "")
	if m := mountNamed(c, "kubelet-config"); m != nil || vols["kubelet-config"] != nil {
		t.Errorf("default values mount the kubelet's config directory: %v", m)
	}
	for _, a := range c["args"].([]any) {
		if strings.HasPrefix(a.(string), "--kubelet-") {
			t.Errorf("default values pass %s", a)
		}
	}
	c, vols = agentPod(t, "kubeletConfig: {hostPath: /etc/kubernetes, file: /etc/kubernetes/kubelet.yaml, thresholds: ignore}")
	m := mountNamed(c, "kubelet-config")
	if m == nil || m["mountPath"] != "/host/etc/kubernetes" || m["readOnly"] != true || m["recursiveReadOnly"] != "IfPossible" {
		t.Errorf("the kubelet's config mount %v; want /host/etc/kubernetes, read-only", m)
	}
	if hp, _ := vols["kubelet-config"]["hostPath"].(map[string]any); hp["path"] != "/etc/kubernetes" || hp["type"] != "Directory" {
		t.Errorf("the kubelet's config volume %v", vols["kubelet-config"])
	}
	args := c["args"].([]any)
	for _, want := range []string{"--kubelet-config=/etc/kubernetes/kubelet.yaml", "--kubelet-thresholds=ignore"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	for _, bad := range []string{"kubeletConfig: {thresholds: above}", "kubeletConfig: {hostPath: etc/kubernetes}", "kubeletConfig: {file: /etc/k/}"} {
		if _, err := render(t, bad); err == nil || !strings.Contains(err.Error(), "kubeletConfig") {
			t.Errorf("%s: %v; want a schema error naming kubeletConfig", bad, err)
		}
	}
}

// TestManifestKubeletConfigCommented: deploy/daemonset.yaml carries the
// kubelet-config mount and volume commented out, and uncommenting them gives
// what the chart renders with kubeletConfig.hostPath: /etc/kubernetes.
func TestManifestKubeletConfigCommented(t *testing.T) {
	src, err := os.ReadFile(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	uncommented, blocks := uncommentBlocks(string(src), "# - name: kubelet-config")
	if blocks != 2 {
		t.Fatalf("deploy/daemonset.yaml has %d commented kubelet-config blocks; want 2 (the mount and the volume)", blocks)
	}
	want, err := framework.ParseManifest(strings.NewReader(uncommented))
	if err != nil {
		t.Fatalf("deploy/daemonset.yaml with kubelet-config uncommented: %v", err)
	}
	equalsChart(t, want, "kubeletConfig: {hostPath: /etc/kubernetes}", "deploy/daemonset.yaml with kubelet-config uncommented")
}
