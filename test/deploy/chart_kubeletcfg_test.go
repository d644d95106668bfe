// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"slices"
	"strconv"
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

// TestChartKubeletConfigFiles: kubeletConfig.hostFiles mounts each file
// alone, read-only at its path under /host, with type File (a missing one
// keeps the pod off the node instead of having the runtime make a
// directory there); kubeletConfig.hostPathType "" leaves the directory
// unchecked; cgroupRoot becomes --cgroup-root. A path mounted where another
// mount is, and values out of shape, are refused naming the value.
func TestChartKubeletConfigFiles(t *testing.T) {
	c, vols := agentPod(t, "kubeletConfig: {hostPath: /etc/openshift/kubelet.conf.d, hostPathType: '', hostFiles: [/etc/kubernetes/kubelet.conf, /home/kubernetes/kubelet-config.yaml]}\ncgroupRoot: /kubelet.slice")
	for i, f := range []string{"/etc/kubernetes/kubelet.conf", "/home/kubernetes/kubelet-config.yaml"} {
		name := "kubelet-config-file-" + strconv.Itoa(i)
		m := mountNamed(c, name)
		if m == nil || m["mountPath"] != "/host"+f || m["readOnly"] != true {
			t.Errorf("mount %s: %v; want %s read-only at /host%s", name, m, f, f)
		}
		if hp, _ := vols[name]["hostPath"].(map[string]any); hp["path"] != f || hp["type"] != "File" {
			t.Errorf("volume %s: %v; want hostPath %s, type File", name, vols[name], f)
		}
	}
	if hp, _ := vols["kubelet-config"]["hostPath"].(map[string]any); hp["path"] != "/etc/openshift/kubelet.conf.d" || hp["type"] != "" {
		t.Errorf("the kubelet's config volume %v; want type \"\"", vols["kubelet-config"])
	}
	if args := c["args"].([]any); !slices.Contains(args, any("--cgroup-root=/kubelet.slice")) {
		t.Errorf("args %v lack --cgroup-root=/kubelet.slice", args)
	}
	c, _ = agentPod(t, "")
	for _, a := range c["args"].([]any) {
		if strings.HasPrefix(a.(string), "--cgroup-root") {
			t.Errorf("default values pass %s", a)
		}
	}
	for bad, want := range map[string]string{
		"kubeletConfig: {hostPath: /var/lib/kubelet}":    "kubeletConfig.hostPath \"/var/lib/kubelet\" is mounted at /host/var/lib/kubelet, where hostPaths.kubeletRoot already is",
		"kubeletConfig: {hostFiles: [/var/log/pods]}":    "kubeletConfig.hostFiles[0] \"/var/log/pods\" is mounted at /host/var/log/pods, where hostPaths.podLogs already is",
		"kubeletConfig: {hostFiles: [etc/kubelet.conf]}": "kubeletConfig",
		"kubeletConfig: {hostFiles: [/a, /a]}":           "kubeletConfig",
		"kubeletConfig: {hostPathType: File}":            "kubeletConfig",
		"cgroupRoot: kubelet.slice":                      "cgroupRoot",
		"platform: eks-fargate":                          "platform",
		"openshift: {scc: {create: yes-please}}":         "openshift",
	} {
		if _, err := render(t, bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error saying %q", bad, err, want)
		}
	}
}
