package vmnode

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/evictd/evictd/test/e2e/framework"
)

// writeConfigs writes what containerd, CNI and the kubelet read, into OutDir
// (the guest sees it at the same path).
func (n *Node) writeConfigs(o NodeOptions, runtime string) error {
	kubeconfig, err := o.Cluster.NodeCredentials(o.Name, "https://"+framework.ServiceIP.String()+":443")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"kubelet.kubeconfig": kubeconfig,
		"ca.crt":             o.Cluster.CAData,
		"containerd.toml":    []byte(containerdConfig(runtime, n.OutDir, o.PauseImage)),
		"cni/10-evictd.conflist": []byte(`{
  "cniVersion": "1.0.0",
  "name": "evictd-vm",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + podSubnet + `"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
`),
	}
	kc, err := kubeletConfig(n.OutDir, o.SwapMiB > 0)
	if err != nil {
		return err
	}
	files["kubelet.yaml"] = kc
	for name, data := range files {
		p := filepath.Join(n.OutDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(n.OutDir, "manifests"), 0o755)
}

// containerdConfig is containerd 2.4's config for the node, in version 4,
// the one containerd 2.4 dumps (its CRI plugins are io.containerd.cri.v1.images
// and io.containerd.cri.v1.runtime since version 3; version 4 moves the
// socket to the io.containerd.server.v1.grpc plugin, and a version 3 file is
// migrated at every start with a warning): cgroupfs (no systemd in the guest; containerd 2 reports the driver
// to the kubelet over CRI's RuntimeConfig from SystemdCgroup, so it must
// agree with the kubelet's), overlayfs snapshots on the node disk, the pause
// image built locally and pinned as the sandbox image, runc and CNI from
// prepare.sh's unpacked packages, and no AppArmor (the guest kernel runs
// none).
func containerdConfig(runtime, out, pause string) string {
	return fmt.Sprintf(`version = 4
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs"]

[plugins."io.containerd.server.v1.grpc"]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %q

[plugins."io.containerd.cri.v1.runtime"]
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%q]
    conf_dir = %q
`, pause, filepath.Join(runtime, "usr", "sbin", "runc"),
		filepath.Join(runtime, "usr", "lib", "cni"), filepath.Join(out, "cni"))
}

// kubeletConfig is the KubeletConfiguration (JSON, which is YAML). The
// kubelet keeps its default eviction thresholds and housekeeping: the tests
// measure evictd against the kubelet as operators run it. With swap, the
// node's Burstable pods may use it (LimitedSwap, GA in 1.34).
func kubeletConfig(out string, swap bool) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":             "kubelet.config.k8s.io/v1beta1",
		"kind":                   "KubeletConfiguration",
		"cgroupDriver":           "cgroupfs",
		"cgroupRoot":             "/",
		"cgroupsPerQOS":          true,
		"enforceNodeAllocatable": []string{"pods"},
		"failSwapOn":             false,
		// The guest has no iptables.
		"makeIPTablesUtilChains":   false,
		"hairpinMode":              "none",
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"staticPodPath":            filepath.Join(out, "manifests"),
		// /stats/summary without credentials, through a loopback forward.
		// Nothing else reaches the kubelet: the API server never dials it.
		"readOnlyPort": guestReadOnlyPort,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": false},
			"x509":      map[string]any{"clientCAFile": filepath.Join(out, "ca.crt")},
		},
		"authorization":             map[string]any{"mode": "AlwaysAllow"},
		"serializeImagePulls":       false,
		"resolvConf":                "/etc/resolv.conf",
		"registerNode":              true,
		"nodeStatusReportFrequency": "20s",
	}
	if swap {
		cfg["memorySwap"] = map[string]any{"swapBehavior": "LimitedSwap"}
	}
	return json.MarshalIndent(cfg, "", "  ")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func copyLimited(w io.Writer, r io.Reader, limit int64) (int64, error) {
	n, err := io.Copy(w, io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		return n, fmt.Errorf("more than %d bytes", limit)
	}
	return n, err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
