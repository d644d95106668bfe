// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNodeUnits: a systemd node's units run containerd delegated its
// cgroups and the kubelet with its config, each word of their command lines
// quoted as systemd reads it, their output into the logs a cgroupfs node
// writes.
func TestNodeUnits(t *testing.T) {
	units, err := nodeUnits("/bin/containerd", "/bin/kubelet", "/out", "evictd-vm", "/bin:/usr/bin")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		containerdUnit: {
			`ExecStart="/bin/containerd" "--config" "/out/containerd.toml"`,
			"Delegate=yes", "KillMode=process", "Type=notify",
			`Environment="PATH=/bin:/usr/bin"`,
			"StandardOutput=append:/out/containerd.log",
		},
		kubeletUnit: {
			`ExecStart="/bin/kubelet" "--config=/out/kubelet.yaml" "--kubeconfig=/out/kubelet.kubeconfig" "--hostname-override=evictd-vm" "--v=3"`,
			"After=containerd.service",
			"StandardOutput=append:/out/kubelet.log",
		},
	}
	for unit, lines := range want {
		text, ok := units[unit]
		if !ok {
			t.Errorf("no unit %s", unit)
			continue
		}
		for _, l := range lines {
			if !strings.Contains("\n"+text+"\n", "\n"+l+"\n") {
				t.Errorf("%s has no line %q:\n%s", unit, l, text)
			}
		}
	}
	if _, err := nodeUnits("/bin/containerd", "/bin/kubelet", "/my out", "n", "/bin"); err == nil ||
		!strings.Contains(err.Error(), `"/my out"`) {
		t.Errorf("an OutDir with a space: err %v, want one naming it", err)
	}
}

func TestUnitQuote(t *testing.T) {
	for in, want := range map[string]string{
		`/bin/x`:      `"/bin/x"`,
		`a "b" c`:     `"a \"b\" c"`,
		`50%`:         `"50%%"`,
		`back\slash`:  `"back\\slash"`,
		`--relay=a:1`: `"--relay=a:1"`,
	} {
		if got := unitQuote(in); got != want {
			t.Errorf("unitQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestKubeletConfigCgroupDriver: the kubelet gets the node's driver.
func TestKubeletConfigCgroupDriver(t *testing.T) {
	for _, driver := range []string{CgroupFS, Systemd} {
		b, err := kubeletConfig("/out", false, driver)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg["cgroupDriver"] != driver {
			t.Errorf("cgroupDriver %v, want %s", cfg["cgroupDriver"], driver)
		}
	}
}
