// SPDX-License-Identifier: Apache-2.0

// Package kubelettest lays out, for tests, a host root whose kubelet
// process and config file evictd reads (/proc/PID/cmdline and stat, the
// KubeletConfiguration), and restarts that kubelet with other thresholds.
package kubelettest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/options"
)

// KubeletCgroup is the kubelet's /proc/PID/cgroup on a cgroup v2 node that
// runs it as a systemd unit: outside the pods' tree, as evictd requires.
const KubeletCgroup = "0::/system.slice/kubelet.service\n"

// Root is a host root whose kubelet runs with a config file that
// sets memory.available<750Mi (and nothing else: the kubelet's other
// defaults are dropped, kubernetes#119985).
func Root(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range map[string]string{
		"proc/1/cmdline":              "/sbin/init\x00",
		"proc/640/cmdline":            "/usr/bin/kubelet\x00--config=/var/lib/kubelet/config.yaml\x00--v=2\x00",
		"proc/640/cgroup":             KubeletCgroup,
		"var/lib/kubelet/config.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: 750Mi\n  pid.available: 5%\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Options are node n1's `evictd run` options on hostRoot with args,
// completed and validated.
func Options(t testing.TB, hostRoot string, args ...string) *options.Options {
	t.Helper()
	o := options.NewOptions()
	sections := &cliflag.Sections{}
	o.AddFlags(sections)
	if err := sections.FlagSet("t").Parse(append([]string{"--node-name=n1", "--host-root=" + hostRoot}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return o
}

// SetKubelet makes root's kubelet process pid, started at tick start, with
// --config naming the config file, which holds hard: a restarted kubelet
// (the stat is this test process's own, the PID and start time set).
func SetKubelet(t testing.TB, root string, pid int, start uint64, hard string) {
	t.Helper()
	procs, _ := filepath.Glob(filepath.Join(root, "proc", "[0-9]*"))
	for _, p := range procs {
		if filepath.Base(p) != "1" {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(self)
	end := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[end+1:])
	fields[22-3] = strconv.FormatUint(start, 10)
	stat := strconv.Itoa(pid) + " (kubelet) " + strings.Join(fields, " ") + "\n"
	files := map[string]string{
		"proc/" + strconv.Itoa(pid) + "/cmdline": "/usr/bin/kubelet\x00--config=/var/lib/kubelet/config.yaml\x00",
		"proc/" + strconv.Itoa(pid) + "/stat":    stat,
		"proc/" + strconv.Itoa(pid) + "/cgroup":  KubeletCgroup,
	}
	if hard != "" {
		files["var/lib/kubelet/config.yaml"] = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n" + hard
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
