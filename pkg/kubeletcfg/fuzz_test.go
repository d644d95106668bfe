// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The fuzz targets feed the kubelet's command line, kubeadm's flags file and
// the configuration file with its drop-ins through the parsers evictd reads
// a node's kubelet with. Nothing may panic; an error names what it refused;
// whatever parses, written back in its plain form, parses to the same
// (hack/fuzz.sh runs each for a while).

// kubeletFlags are the flags ParseArgs reads.
var kubeletFlags = []string{flagConfig, flagConfigDir, flagHard, flagSoft, flagSoftGrace, flagMinReclaim,
	flagImageGCHigh, flagImageGCLow, flagEnforce, flagIgnoreEvict}

// formatArgs writes a back as the plain command line that says it: one
// --name=value for each flag given, maps as sorted pairs.
func formatArgs(a Args) []string {
	var out []string
	str := func(name, v string) { out = append(out, "--"+name+"="+v) }
	if a.Config != "" {
		str(flagConfig, a.Config)
	}
	if a.ConfigDir != "" {
		str(flagConfigDir, a.ConfigDir)
	}
	for _, m := range []struct {
		name, sep string
		m         map[string]string
	}{{flagHard, "<", a.Hard}, {flagSoft, "<", a.Soft}, {flagSoftGrace, "=", a.SoftGrace}, {flagMinReclaim, "=", a.MinReclaim}} {
		if m.m == nil {
			continue
		}
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(m.m)) {
			pairs = append(pairs, k+m.sep+m.m[k])
		}
		str(m.name, strings.Join(pairs, ","))
	}
	if a.ImageGCHigh != nil {
		str(flagImageGCHigh, fmt.Sprint(*a.ImageGCHigh))
	}
	if a.ImageGCLow != nil {
		str(flagImageGCLow, fmt.Sprint(*a.ImageGCLow))
	}
	if a.EnforceNodeAllocatable != nil {
		str(flagEnforce, strings.Join(a.EnforceNodeAllocatable, ","))
	}
	if a.AllocatableIgnoresEviction {
		str(flagIgnoreEvict, "true")
	}
	return out
}

// namesBadArg reports whether err, ParseArgs' error for args, names the
// flag it refused and, unless the flag had no value at all, the text it
// refused: a whole argument or the value given to a flag.
func namesBadArg(err error, args []string) bool {
	msg := err.Error()
	named := false
	for _, f := range kubeletFlags {
		if strings.Contains(msg, f) {
			named = true
		}
	}
	if !named {
		return false
	}
	if strings.Contains(msg, "has no value") {
		return true
	}
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.Contains(msg, "="+v) {
			return true
		}
		if strings.Contains(msg, a) {
			return true
		}
	}
	return false
}

// FuzzParseArgs: a kubelet's command line as /proc/PID/cmdline holds it.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"/usr/bin/kubelet\x00--config=/var/lib/kubelet/config.yaml\x00--v=2\x00",
		"kubelet\x00--eviction-hard=memory.available<500Mi,nodefs.available<10%\x00--eviction-hard\x00imagefs.available<15%\x00",
		"kubelet\x00--eviction-soft=memory.available<1Gi\x00--eviction-soft-grace-period=memory.available=1m30s\x00",
		"kubelet\x00--eviction_minimum_reclaim=memory.available=100Mi\x00--config-dir\x00/etc/kubernetes/kubelet.conf.d\x00",
		"kubelet\x00--image-gc-high-threshold=0x50\x00--image-gc-low-threshold=070\x00--enforce-node-allocatable=pods,system-reserved\x00",
		"kubelet\x00--experimental-allocatable-ignore-eviction\x00--enforce-node-allocatable=\x00--\x00--config=/x\x00",
		"kubelet\x00-config=/x\x00", "kubelet\x00--eviction-hard\x00", "kubelet\x00--eviction-hard=memory.available\x00",
		"kubelet\x00--image-gc-high-threshold=eighty\x00", "kubelet\x00--experimental-allocatable-ignore-eviction=maybe\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, cmdline []byte) {
		argv := SplitCmdline(cmdline)
		if len(argv) == 0 {
			return
		}
		args := argv[1:]
		a, err := ParseArgs(args)
		if err != nil {
			if !namesBadArg(err, args) {
				t.Fatalf("ParseArgs(%q): error %q names neither the flag nor what it refused", args, err)
			}
			return
		}
		plain := formatArgs(a)
		b, err := ParseArgs(plain)
		if err != nil {
			t.Fatalf("ParseArgs(%q) = %+v, written back as %q, which does not parse: %v", args, a, plain, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("ParseArgs(%q) = %+v, written back as %q, which parses to %+v", args, a, plain, b)
		}
		// The flags laid over a configuration keep what they say.
		c := ApplyFlags(NoFile(), a)
		if a.Hard != nil && !maps.Equal(c.Hard, a.Hard) {
			t.Fatalf("ApplyFlags: hard %v, the flags say %v", c.Hard, a.Hard)
		}
		if a.ImageGCHigh != nil && *c.ImageGCHigh != *a.ImageGCHigh {
			t.Fatalf("ApplyFlags: image GC high %d, the flags say %d", *c.ImageGCHigh, *a.ImageGCHigh)
		}
		if g, err := c.ImageGC(); err != nil {
			if !strings.Contains(err.Error(), fmt.Sprint(*c.ImageGCHigh)) && !strings.Contains(err.Error(), fmt.Sprint(*c.ImageGCLow)) {
				t.Fatalf("ImageGC of high %d, low %d: error %q names neither", *c.ImageGCHigh, *c.ImageGCLow, err)
			}
		} else if g.Low < 0 || g.Low >= g.High || g.High > 100 {
			t.Fatalf("ImageGC of high %d, low %d accepted as %+v", *c.ImageGCHigh, *c.ImageGCLow, g)
		}
	})
}

// FuzzParseKubeadmEnv: kubeadm's /var/lib/kubelet/kubeadm-flags.env.
func FuzzParseKubeadmEnv(f *testing.F) {
	for _, s := range []string{
		"KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n",
		"# kubeadm\nKUBELET_KUBEADM_ARGS='--eviction-hard=memory.available<1Gi'\n", "KUBELET_KUBEADM_ARGS=\"--v=2\n", "OTHER=1\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		args, err := ParseKubeadmEnv(data)
		if err != nil {
			if !strings.Contains(err.Error(), "KUBELET_KUBEADM_ARGS=") {
				t.Fatalf("ParseKubeadmEnv(%q): error %q does not name the line", data, err)
			}
			return
		}
		for _, a := range args {
			if a == "" || strings.ContainsAny(a, " \t\n\r\v\f") {
				t.Fatalf("ParseKubeadmEnv(%q): argument %q is empty or holds white space", data, a)
			}
		}
		line := `KUBELET_KUBEADM_ARGS="` + strings.Join(args, " ") + `"`
		again, err := ParseKubeadmEnv([]byte(line))
		if err != nil || !slices.Equal(again, args) {
			t.Fatalf("ParseKubeadmEnv(%q) = %q, written back as %q, which parses to %q, %v", data, args, line, again, err)
		}
		// What kubeadm passes reaches the flag parser whole: no panic, and
		// an error that names what it refused.
		if _, err := ParseArgs(args); err != nil && !namesBadArg(err, args) {
			t.Fatalf("ParseArgs(%q): error %q names neither the flag nor what it refused", args, err)
		}
	})
}

// sameFile reports whether two Files say the same: an empty map or list is
// no map or list (the kubelet's omitempty drops both when it marshals).
func sameFile(a, b File) bool {
	norm := func(f File) File {
		for _, m := range []*map[string]string{&f.Hard, &f.Soft, &f.SoftGrace, &f.MinReclaim} {
			if len(*m) == 0 {
				*m = nil
			}
		}
		if len(f.EnforceNodeAllocatable) == 0 {
			f.EnforceNodeAllocatable = nil
		}
		return f
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// FuzzParseFile: a --config file and one --config-dir drop-in laid over it.
func FuzzParseFile(f *testing.F) {
	cfg := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	for _, c := range [][2]string{
		{cfg + "evictionHard:\n  memory.available: 500Mi\n  nodefs.available: 10%\nimageGCHighThresholdPercent: 90\n",
			cfg + "evictionHard:\n  memory.available: 1Gi\n  nodefs.available: null\n"},
		{cfg + "mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 200Mi}\nenforceNodeAllocatable: []\n",
			`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","evictionHard":null}`},
		{cfg + "evictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: 1m}\nevictionMinimumReclaim: {memory.available: 0.5Gi}\n",
			cfg + "imageGCLowThresholdPercent: \"80\"\n"},
		{"apiVersion: v1\nkind: Pod\n", "kind: KubeletConfiguration\n"},
		{"- a\n- b\n", "{"}, {"", " \n"},
		{cfg + "evictionHard: [1]\n", cfg + "imageGCHighThresholdPercent: 1e40\n"},
	} {
		f.Add([]byte(c[0]), []byte(c[1]))
	}
	f.Fuzz(func(t *testing.T, data, dropin []byte) {
		file, err := ParseFile(data)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("ParseFile(%q): error %q is not one line", data, msg)
			}
			return
		}
		if file.APIVersion != APIVersion || file.Kind != Kind {
			t.Fatalf("ParseFile(%q) accepted apiVersion %q, kind %q", data, file.APIVersion, file.Kind)
		}
		js, err := json.Marshal(file)
		if err != nil {
			t.Fatalf("ParseFile(%q) = %+v, which does not marshal: %v", data, file, err)
		}
		again, err := ParseFile(js)
		if err != nil || !sameFile(again, file) {
			t.Fatalf("ParseFile(%q) = %+v, written back as %s, which parses to %+v, %v", data, file, js, again, err)
		}
		c := LoadFile(file, "/etc/kubelet.yaml")
		if len(c.Hard) == 0 && file.Hard == nil {
			t.Fatalf("LoadFile of a file without evictionHard: no defaults (%v)", c.Hard)
		}
		for k := range c.Hard {
			if c.HardFrom[k] == "" {
				t.Fatalf("LoadFile: evictionHard %s has no origin (%v)", k, c.HardFrom)
			}
		}
		js, err = ParseDropin(dropin)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("ParseDropin(%q): error %q is not one line", dropin, msg)
			}
			return
		}
		const path = "/etc/kubelet.conf.d/90-fuzz.conf"
		m, err := MergeDropins(c, []Dropin{{Path: path, JSON: js}})
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("MergeDropins(%s): error %q does not name the drop-in", js, err)
			}
			return
		}
		for k := range m.Hard {
			if m.HardFrom[k] == "" {
				t.Fatalf("MergeDropins(%s): evictionHard %s has no origin (%v)", js, k, m.HardFrom)
			}
		}
		if m.ImageGCHigh == nil || m.ImageGCLow == nil || m.MergeDefaults == nil || m.EnforceNodeAllocatable == nil {
			t.Fatalf("MergeDropins(%s): the defaults are not set again: %+v", js, m.File)
		}
	})
}

// FuzzParseCgroup: /proc/PID/cgroup, by which a kubelet is told from a
// process in a pod.
func FuzzParseCgroup(f *testing.F) {
	for _, s := range []string{
		"0::/system.slice/kubelet.service\n",
		"12:memory:/kubepods/burstable/pod1/abc\n11:cpu,cpuacct:/kubepods/burstable/pod1/abc\n0::/\n",
		"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-a.scope\n",
		"0::/../../kubepods-burstable.slice\n", "", "garbage\n", "1:name=systemd:relative\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCgroup(data)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "cgroup") {
				t.Fatalf("ParseCgroup(%q): error %q does not say what it read", data, msg)
			}
			return
		}
		if !strings.HasPrefix(c.Path, "/") {
			t.Fatalf("ParseCgroup(%q): path %q is not absolute", data, c.Path)
		}
		if c.InPods != (c.PodsLine != "") || (c.InPods && !strings.Contains(string(data), c.PodsLine)) {
			t.Fatalf("ParseCgroup(%q): in pods %v on line %q, which the file does not hold", data, c.InPods, c.PodsLine)
		}
		if c.InPods {
			_, place, _ := strings.Cut(c.PodsLine, ":")
			_, place, _ = strings.Cut(place, ":")
			if !slices.ContainsFunc(strings.Split(place, "/"), IsPodsCgroupName) {
				t.Fatalf("ParseCgroup(%q): in pods by line %q, whose path has no pods cgroup", data, c.PodsLine)
			}
		}
	})
}
