// SPDX-License-Identifier: Apache-2.0

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

// The kubelet's cgroup drivers, NodeOptions.CgroupDriver.
const (
	CgroupFS = "cgroupfs"
	Systemd  = "systemd"
)

// The units of a systemd node's daemons, which hack/vm/node.sh installs
// from OutDir/units.
const (
	containerdUnit = "containerd.service"
	kubeletUnit    = "kubelet.service"
	unitsDir       = "units"
)

// writeConfigs writes what containerd, CNI and the kubelet read, into OutDir
// (the guest sees it at the same path), and on a systemd node the units.
func (n *Node) writeConfigs(o NodeOptions, runtime string) error {
	kubeconfig, err := o.Cluster.NodeCredentials(o.Name, "https://"+framework.ServiceIP.String()+":443")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"kubelet.kubeconfig": kubeconfig,
		"ca.crt":             o.Cluster.CAData,
		"containerd.toml":    []byte(containerdConfig(runtime, n.OutDir, o.PauseImage, o.CgroupDriver == Systemd)),
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
	kc, err := kubeletConfig(n.OutDir, o.SwapMiB > 0, o.CgroupDriver)
	if err != nil {
		return err
	}
	files["kubelet.yaml"] = kc
	if o.CgroupDriver == Systemd {
		units, err := nodeUnits(n.Containerd, n.Kubelet, n.OutDir, n.Name, n.path)
		if err != nil {
			return err
		}
		for name, text := range units {
			files[filepath.Join(unitsDir, name)] = []byte(text)
		}
	}
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
// migrated at every start with a warning): runc's cgroup driver the
// kubelet's (containerd 2 reports it to the kubelet over CRI's
// RuntimeConfig from SystemdCgroup, so they must agree), overlayfs snapshots on the node disk, the pause
// image built locally and pinned as the sandbox image, runc and CNI from
// prepare.sh's unpacked packages, and no AppArmor (the guest kernel runs
// none).
func containerdConfig(runtime, out, pause string, systemdCgroup bool) string {
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
        SystemdCgroup = %t
        BinaryName = %q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%q]
    conf_dir = %q
`, pause, systemdCgroup, filepath.Join(runtime, "usr", "sbin", "runc"),
		filepath.Join(runtime, "usr", "lib", "cni"), filepath.Join(out, "cni"))
}

// kubeletConfig is the KubeletConfiguration (JSON, which is YAML). The
// kubelet keeps its default eviction thresholds and housekeeping: the tests
// measure evictd against the kubelet as operators run it. With swap, the
// node's Burstable pods may use it (LimitedSwap, GA in 1.34).
func kubeletConfig(out string, swap bool, cgroupDriver string) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":             "kubelet.config.k8s.io/v1beta1",
		"kind":                   "KubeletConfiguration",
		"cgroupDriver":           cgroupDriver,
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

// nodeUnits are a systemd node's units for containerd and the kubelet,
// by file name. containerd's is Delegate=yes, as containerd's own
// containerd.service: the shims and runc manage the cgroups beneath it, and
// KillMode=process leaves the containers running when it stops. Neither
// restarts by itself: a daemon that dies fails the test, as on a cgroupfs
// node. Their output goes to the same logs in OutDir as there.
func nodeUnits(containerd, kubelet, out, name, path string) (map[string]string, error) {
	if strings.ContainsAny(out, " \t\n") {
		return nil, fmt.Errorf("vmnode: OutDir %q has white space, which a unit's StandardOutput=append: cannot name", out)
	}
	return map[string]string{
		containerdUnit: `[Unit]
Description=containerd (test/vmnode)
Wants=dbus.service
After=dbus.service

[Service]
Type=notify
Environment=` + unitQuote("PATH="+path) + `
ExecStart=` + unitExec(containerd, "--config", filepath.Join(out, "containerd.toml")) + `
Delegate=yes
KillMode=process
LimitNOFILE=infinity
TasksMax=infinity
TimeoutStartSec=5min
StandardOutput=append:` + filepath.Join(out, "containerd.log") + `
StandardError=inherit
`,
		kubeletUnit: `[Unit]
Description=kubelet (test/vmnode)
Wants=containerd.service
After=containerd.service

[Service]
Environment=` + unitQuote("PATH="+path) + `
ExecStart=` + kubeletExecStart(kubelet, out, name) + `
StandardOutput=append:` + filepath.Join(out, "kubelet.log") + `
StandardError=inherit
`,
	}, nil
}

// kubeletExecStart is the kubelet unit's command line, with extra flags
// after the node's own (a test's kubelet.service drop-in).
func kubeletExecStart(kubelet, out, name string, extra ...string) string {
	return unitExec(append([]string{kubelet, "--config=" + filepath.Join(out, "kubelet.yaml"),
		"--kubeconfig=" + filepath.Join(out, "kubelet.kubeconfig"), "--hostname-override=" + name,
		// 3: the eviction manager logs its observations every loop.
		"--v=3"}, extra...)...)
}

// unitExec is argv as a unit's command line, which also expands
// $VARIABLES: doubled, a $ stays one.
func unitExec(argv ...string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = unitQuote(strings.ReplaceAll(a, "$", "$$"))
	}
	return strings.Join(q, " ")
}

// unitQuote quotes one word of a unit file's command line or Environment=:
// in double quotes, with systemd's escapes for the quote and the backslash,
// and specifiers (%) doubled so they stay literal.
func unitQuote(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(s)
	return `"` + s + `"`
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
