// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
)

// renderOn renders the chart as `helm template evictd deploy/helm/evictd
// -n evictd-system --api-versions V ...` does, with Helm's own library: the
// chart sees each of apiVersions in .Capabilities.APIVersions, as it sees
// the cluster's APIs at install. The hooks (the cleanup Job) come last.
func renderOn(t *testing.T, valuesYAML string, apiVersions ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	rel, err := dryRunInstallOn(t, defaultRelease, defaultNamespace, valuesYAML, apiVersions...)
	if err != nil {
		return nil, err
	}
	manifest := rel.Manifest
	for _, h := range rel.Hooks {
		manifest += "\n---\n" + h.Manifest
	}
	objs, err := framework.ParseManifest(strings.NewReader(manifest))
	if err != nil {
		t.Fatalf("rendered manifest: %v", err)
	}
	return objs, nil
}

func presetValues(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "presets", name+".yaml"))
	if err != nil {
		t.Fatalf("preset %s: %v", name, err)
	}
	return string(b)
}

// TestChartRefusesGKEAutopilot: platform gke-autopilot is refused at
// install, saying why evictd cannot run there and what to use instead. No
// API tells Autopilot apart at install (auto.gke.io is served on GKE
// Standard too), so the value is the signal; GKE Standard's preset renders.
func TestChartRefusesGKEAutopilot(t *testing.T) {
	_, err := renderOn(t, "platform: gke-autopilot", "auto.gke.io/v1")
	if err == nil {
		t.Fatal("platform gke-autopilot rendered; want it refused")
	}
	for _, want := range []string{"GKE Autopilot", "hostPath volumes outside /var/log", "added capabilities", "presets/gke.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if _, err := renderOn(t, presetValues(t, "gke"), "auto.gke.io/v1"); err != nil {
		t.Errorf("GKE Standard's preset on a cluster serving auto.gke.io/v1: %v", err)
	}
}

// TestChartRefusesOpenShiftWithoutPreset: on a cluster that serves
// security.openshift.io/v1 (helm template --api-versions
// security.openshift.io/v1), a release without platform openshift is
// refused, naming the preset, whatever other preset it has; with the
// preset it renders, and the SCC objects come with it. Without that API
// (helm template alone, any other cluster) nothing changes.
func TestChartRefusesOpenShiftWithoutPreset(t *testing.T) {
	for _, values := range []string{"", presetValues(t, "crio"), presetValues(t, "k3s")} {
		_, err := renderOn(t, values, "security.openshift.io/v1")
		if err == nil || !strings.Contains(err.Error(), "security.openshift.io/v1 (OpenShift)") ||
			!strings.Contains(err.Error(), "-f deploy/helm/evictd/presets/openshift.yaml") {
			t.Errorf("values %.40q on OpenShift: %v; want it refused, naming presets/openshift.yaml", values, err)
		}
	}
	objs, err := renderOn(t, presetValues(t, "openshift"), "security.openshift.io/v1")
	if err != nil {
		t.Fatalf("the openshift preset on OpenShift: %v", err)
	}
	if !has(objs, "SecurityContextConstraints") {
		t.Errorf("the openshift preset renders no SecurityContextConstraints: %v", keys(byKey(t, objs)))
	}
	if objs, err := renderOn(t, ""); err != nil || has(objs, "SecurityContextConstraints") {
		t.Errorf("defaults without OpenShift's API: %v, SCC rendered %v", err, err == nil && has(objs, "SecurityContextConstraints"))
	}
}

// scc is a security.openshift.io/v1 SecurityContextConstraints, the fields
// admission reads; decoding refuses a field the type does not have.
type scc struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   map[string]any    `json:"metadata"`
	Priority   *int32            `json:"priority"`
	Users      []string          `json:"users"`
	Groups     []string          `json:"groups"`
	Privileged bool              `json:"allowPrivilegedContainer"`
	Escalation *bool             `json:"allowPrivilegeEscalation"`
	HostDir    bool              `json:"allowHostDirVolumePlugin"`
	HostIPC    bool              `json:"allowHostIPC"`
	HostNet    bool              `json:"allowHostNetwork"`
	HostPID    bool              `json:"allowHostPID"`
	HostPorts  bool              `json:"allowHostPorts"`
	ReadOnly   bool              `json:"readOnlyRootFilesystem"`
	Allowed    []string          `json:"allowedCapabilities"`
	DefaultAdd []string          `json:"defaultAddCapabilities"`
	Drop       []string          `json:"requiredDropCapabilities"`
	RunAsUser  sccUser           `json:"runAsUser"`
	SELinux    sccSELinux        `json:"seLinuxContext"`
	Seccomp    []string          `json:"seccompProfiles"`
	FSGroup    map[string]string `json:"fsGroup"`
	SuppGroups map[string]string `json:"supplementalGroups"`
	Volumes    []string          `json:"volumes"`
}

type sccUser struct {
	Type string `json:"type"`
	UID  *int64 `json:"uid,omitempty"`
}

type sccSELinux struct {
	Type    string                 `json:"type"`
	Options *corev1.SELinuxOptions `json:"seLinuxOptions,omitempty"`
}

// The namespace OpenShift admits the pods in: the MCS level and UID range
// its annotations give (openshift.io/sa.scc.mcs, sa.scc.uid-range).
const (
	nsMCS            = "s0:c28,c17"
	nsUIDMin, nsUIDs = 1000680000, 10000
)

// builtinSCCs are OpenShift's own SCCs as its kube-apiserver operator
// ships them (bindata/bootkube/scc-manifests in
// openshift/cluster-kube-apiserver-operator), the fields admission reads.
var builtinSCCs = []scc{
	{Metadata: map[string]any{"name": "restricted-v2"}, Escalation: ptr.To(false), Allowed: []string{"NET_BIND_SERVICE"}, Drop: []string{"ALL"},
		RunAsUser: sccUser{Type: "MustRunAsRange"}, SELinux: sccSELinux{Type: "MustRunAs"}, Seccomp: []string{"runtime/default"},
		Volumes: []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"}},
	{Metadata: map[string]any{"name": "nonroot-v2"}, Escalation: ptr.To(false), Allowed: []string{"NET_BIND_SERVICE"}, Drop: []string{"ALL"},
		RunAsUser: sccUser{Type: "MustRunAsNonRoot"}, SELinux: sccSELinux{Type: "MustRunAs"}, Seccomp: []string{"runtime/default"},
		Volumes: []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"}},
	{Metadata: map[string]any{"name": "anyuid"}, Escalation: ptr.To(true), Drop: []string{"MKNOD"},
		RunAsUser: sccUser{Type: "RunAsAny"}, SELinux: sccSELinux{Type: "MustRunAs"},
		Volumes: []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"}},
	{Metadata: map[string]any{"name": "hostmount-anyuid"}, HostDir: true, Escalation: ptr.To(true), Drop: []string{"MKNOD"},
		RunAsUser: sccUser{Type: "RunAsAny"}, SELinux: sccSELinux{Type: "MustRunAs"},
		Volumes: []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "hostPath", "image", "nfs", "persistentVolumeClaim", "projected", "secret"}},
	{Metadata: map[string]any{"name": "hostmount-anyuid-v2"}, HostDir: true, Escalation: ptr.To(true), Drop: []string{"MKNOD"},
		RunAsUser: sccUser{Type: "RunAsAny"}, SELinux: sccSELinux{Type: "RunAsAny"},
		Volumes: []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "hostPath", "image", "nfs", "persistentVolumeClaim", "projected", "secret"}},
	{Metadata: map[string]any{"name": "hostaccess"}, HostDir: true, HostIPC: true, HostNet: true, HostPID: true, HostPorts: true, Escalation: ptr.To(true),
		Drop: []string{"KILL", "MKNOD", "SETUID", "SETGID"}, RunAsUser: sccUser{Type: "MustRunAsRange"}, SELinux: sccSELinux{Type: "MustRunAs"},
		Volumes: []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "hostPath", "image", "persistentVolumeClaim", "projected", "secret"}},
	{Metadata: map[string]any{"name": "privileged"}, Privileged: true, HostDir: true, HostIPC: true, HostNet: true, HostPID: true, HostPorts: true,
		Escalation: ptr.To(true), Allowed: []string{"*"}, RunAsUser: sccUser{Type: "RunAsAny"}, SELinux: sccSELinux{Type: "RunAsAny"},
		Seccomp: []string{"*"}, Volumes: []string{"*"}},
}

func (s scc) name() string { n, _ := s.Metadata["name"].(string); return n }

// admit is OpenShift's SCC admission of pod under s
// (openshift/apiserver-library-go, pkg/securitycontextconstraints:
// sccmatching's provider, which first fills what the pod leaves unset
// from the SCC, then validates, and the strategies for users, SELinux,
// seccomp and capabilities), for the fields evictd's pods use. It returns
// each refusal; none: admitted.
func admit(s scc, pod corev1.PodSpec) []string {
	var errs []string
	refuse := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	// The SCC's SELinux options, the namespace's level when it has none.
	var se *corev1.SELinuxOptions
	if s.SELinux.Type == "MustRunAs" {
		se = &corev1.SELinuxOptions{}
		if s.SELinux.Options != nil {
			*se = *s.SELinux.Options
		}
		if se.Level == "" {
			se.Level = nsMCS
		}
	}
	podSE := psc.SELinuxOptions
	if podSE == nil {
		podSE = se
	}
	validSE := func(what string, got *corev1.SELinuxOptions) {
		if s.SELinux.Type != "MustRunAs" {
			return
		}
		if got == nil || got.Level != se.Level || got.Role != se.Role || got.Type != se.Type || got.User != se.User {
			refuse("%s seLinuxOptions %+v: must be %+v", what, got, *se)
		}
	}
	profile := func(p *corev1.SeccompProfile) string {
		switch {
		case p == nil:
			return ""
		case p.Type == corev1.SeccompProfileTypeRuntimeDefault:
			return "runtime/default"
		case p.Type == corev1.SeccompProfileTypeLocalhost:
			return "localhost/" + ptr.Deref(p.LocalhostProfile, "")
		}
		return "unconfined"
	}
	podSeccomp := profile(psc.SeccompProfile)
	if podSeccomp == "" && len(s.Seccomp) > 0 && s.Seccomp[0] != "*" {
		podSeccomp = s.Seccomp[0]
	}
	validSeccomp := func(what, p string) {
		switch {
		case slices.Contains(s.Seccomp, "*"):
		case len(s.Seccomp) == 0 && p != "":
			refuse("%s seccomp %s: seccomp may not be set", what, p)
		case len(s.Seccomp) > 0 && !slices.Contains(s.Seccomp, p):
			refuse("%s seccomp %q is not an allowed profile %v", what, p, s.Seccomp)
		}
	}
	validSeccomp("pod", podSeccomp)
	validSE("pod", podSE)
	if pod.HostNetwork && !s.HostNet || pod.HostPID && !s.HostPID || pod.HostIPC && !s.HostIPC {
		refuse("host namespaces are not allowed")
	}
	for _, v := range pod.Volumes {
		typ := volumeType(v)
		if !slices.Contains(s.Volumes, "*") && !slices.Contains(s.Volumes, typ) {
			refuse("volume %s: %s volumes are not allowed", v.Name, typ)
		}
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		uid, nonRoot := sc.RunAsUser, sc.RunAsNonRoot
		if uid == nil {
			uid = psc.RunAsUser
		}
		if nonRoot == nil {
			nonRoot = psc.RunAsNonRoot
		}
		if uid == nil {
			switch s.RunAsUser.Type {
			case "MustRunAs":
				uid = s.RunAsUser.UID
			case "MustRunAsRange":
				uid = ptr.To[int64](nsUIDMin)
			}
		}
		switch s.RunAsUser.Type {
		case "MustRunAs":
			if uid == nil || s.RunAsUser.UID == nil || *uid != *s.RunAsUser.UID {
				refuse("container %s runAsUser %v: must be %v", c.Name, ptr.Deref(uid, -1), ptr.Deref(s.RunAsUser.UID, -1))
			}
		case "MustRunAsRange":
			if uid == nil || *uid < nsUIDMin || *uid >= nsUIDMin+nsUIDs {
				refuse("container %s runAsUser %v: must be in the namespace's range [%d, %d]", c.Name, ptr.Deref(uid, -1), nsUIDMin, nsUIDMin+nsUIDs-1)
			}
		case "MustRunAsNonRoot":
			if uid != nil && *uid == 0 || uid == nil && !ptr.Deref(nonRoot, false) {
				refuse("container %s runs as root: must run as non-root", c.Name)
			}
		}
		cse := sc.SELinuxOptions
		if cse == nil {
			cse = podSE
		}
		validSE("container "+c.Name, cse)
		cp := profile(sc.SeccompProfile)
		if cp == "" {
			cp = podSeccomp
		}
		validSeccomp("container "+c.Name, cp)
		if ptr.Deref(sc.Privileged, false) && !s.Privileged {
			refuse("container %s: privileged containers are not allowed", c.Name)
		}
		// The SCC's required drops are added to the container's before
		// validation, so only the adds can be refused.
		var add []string
		if sc.Capabilities != nil {
			for _, x := range sc.Capabilities.Add {
				add = append(add, string(x))
			}
		}
		if !slices.Contains(s.Allowed, "*") {
			for _, x := range add {
				if !slices.Contains(s.Allowed, x) && !slices.Contains(s.DefaultAdd, x) {
					refuse("container %s: capability %s may not be added", c.Name, x)
				}
			}
		}
		for _, p := range c.Ports {
			if p.HostPort > 0 && !s.HostPorts {
				refuse("container %s: host ports are not allowed", c.Name)
			}
		}
		if s.ReadOnly && !ptr.Deref(sc.ReadOnlyRootFilesystem, true) {
			refuse("container %s: readOnlyRootFilesystem must be true", c.Name)
		}
		if s.Escalation != nil && !*s.Escalation && ptr.Deref(sc.AllowPrivilegeEscalation, false) {
			refuse("container %s: privilege escalation is not allowed", c.Name)
		}
	}
	return errs
}

// volumeType is the SCC's name of v's type (securityv1.FSType).
func volumeType(v corev1.Volume) string {
	b, _ := json.Marshal(v.VolumeSource)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	for k := range m {
		return k
	}
	return "none"
}

// decodeSCC reads the rendered SCC strictly into scc.
func decodeSCC(t *testing.T, o *unstructured.Unstructured) scc {
	t.Helper()
	b, err := json.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	var s scc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("the rendered SCC: %v", err)
	}
	return s
}

// TestChartOpenShiftSCC: with the openshift preset, the SCC the chart
// renders admits the DaemonSet's pod (the actuator's writable mount
// included) exactly as OpenShift's admission would, while each built-in
// SCC but privileged refuses it, which is why the chart renders one: the
// least that admits it. The uninstall's Job is admitted by the built-in
// nonroot-v2 and refused by restricted-v2, every ServiceAccount's. The
// Roles grant use of exactly these SCCs to exactly the ServiceAccounts
// the DaemonSet and the Job run as.
func TestChartOpenShiftSCC(t *testing.T) {
	for _, extra := range []string{"", "actuator: {enabled: true}"} {
		objs, err := renderOn(t, layValues(t, presetValues(t, "openshift"), extra), "security.openshift.io/v1")
		if err != nil {
			t.Fatal(err)
		}
		var own *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "SecurityContextConstraints" {
				own = o
			}
		}
		if own == nil {
			t.Fatalf("no SecurityContextConstraints among %v", keys(byKey(t, objs)))
		}
		s := decodeSCC(t, own)
		if s.APIVersion != "security.openshift.io/v1" || s.name() != "evictd-evictd-system" || len(s.Users)+len(s.Groups) > 0 {
			t.Errorf("the SCC %s %s grants users %v, groups %v; want evictd-evictd-system, granted by RBAC alone", s.APIVersion, s.name(), s.Users, s.Groups)
		}
		pod, _ := daemonSetPod(t, objs)
		if errs := admit(s, *pod); len(errs) > 0 {
			t.Errorf("values %q: the chart's SCC refuses evictd's pod: %s", extra, strings.Join(errs, "; "))
		}
		for _, b := range builtinSCCs {
			errs := admit(b, *pod)
			if b.name() == "privileged" {
				if len(errs) > 0 {
					t.Errorf("privileged refuses evictd's pod: %v", errs)
				}
				continue
			}
			if len(errs) == 0 {
				t.Errorf("values %q: the built-in SCC %s admits evictd's pod: the chart's own would be needless", extra, b.name())
			}
		}

		var job batchv1.Job
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "Job", "evictd-cleanup").Object, &job); err != nil {
			t.Fatal(err)
		}
		for _, b := range builtinSCCs {
			switch b.name() {
			case "nonroot-v2":
				if errs := admit(b, job.Spec.Template.Spec); len(errs) > 0 {
					t.Errorf("nonroot-v2 refuses the cleanup Job's pod: %v", errs)
				}
			case "restricted-v2":
				if errs := admit(b, job.Spec.Template.Spec); len(errs) == 0 {
					t.Error("restricted-v2 admits the cleanup Job's pod: its Role for nonroot-v2 would be needless")
				}
			}
		}

		grants := map[string][]string{} // ServiceAccount -> SCCs it may use
		roles := map[string][]string{}
		for _, o := range objs {
			if o.GetKind() != "Role" {
				continue
			}
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, "security.openshift.io") {
					if !slices.Equal(rule.Verbs, []string{"use"}) || !slices.Equal(rule.Resources, []string{"securitycontextconstraints"}) {
						t.Errorf("Role %s: rule %+v; want use of securitycontextconstraints only", r.Name, rule)
					}
					roles[r.Name] = append(roles[r.Name], rule.ResourceNames...)
				}
			}
		}
		for _, o := range objs {
			if o.GetKind() != "RoleBinding" {
				continue
			}
			var rb rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &rb); err != nil {
				t.Fatal(err)
			}
			for _, sub := range rb.Subjects {
				grants[sub.Name] = append(grants[sub.Name], roles[rb.RoleRef.Name]...)
			}
		}
		if got := grants[pod.ServiceAccountName]; !slices.Equal(got, []string{s.name()}) {
			t.Errorf("evictd's ServiceAccount %s may use the SCCs %v; want %s alone", pod.ServiceAccountName, got, s.name())
		}
		if got := grants[job.Spec.Template.Spec.ServiceAccountName]; !slices.Equal(got, []string{"nonroot-v2"}) {
			t.Errorf("the cleanup Job's ServiceAccount %s may use the SCCs %v; want nonroot-v2 alone", job.Spec.Template.Spec.ServiceAccountName, got)
		}
	}

	// openshift.scc.create false: none of it, the grant is the user's.
	objs, err := renderOn(t, layValues(t, presetValues(t, "openshift"), "openshift: {scc: {create: false}}"), "security.openshift.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	if has(objs, "SecurityContextConstraints") || slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return strings.HasSuffix(o.GetName(), "-scc") }) {
		t.Errorf("openshift.scc.create false still renders %v", keys(byKey(t, objs)))
	}
}

// TestSCCAdmissionModel: admit refuses what OpenShift's admission refuses
// for each rule it models, so that TestChartOpenShiftSCC's admissions say
// something.
func TestSCCAdmissionModel(t *testing.T) {
	objs, err := renderOn(t, presetValues(t, "openshift"), "security.openshift.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var own scc
	for _, o := range objs {
		if o.GetKind() == "SecurityContextConstraints" {
			own = decodeSCC(t, o)
		}
	}
	base, _ := daemonSetPod(t, objs)
	for what, spoil := range map[string]func(p *corev1.PodSpec){
		"a fourth capability": func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Capabilities.Add = append(p.Containers[0].SecurityContext.Capabilities.Add, "SYS_ADMIN")
		},
		"privileged": func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Privileged = ptr.To(true) },
		"container_t": func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "container_t", Level: "s0"}
		},
		"spc_t without the level":    func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.SELinuxOptions.Level = "" },
		"UID 1000":                   func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.RunAsUser = ptr.To[int64](1000) },
		"host network":               func(p *corev1.PodSpec) { p.HostNetwork = true },
		"a writable root filesystem": func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false) },
		"privilege escalation":       func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true) },
		"an unconfined seccomp":      func(p *corev1.PodSpec) { p.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined },
		"an emptyDir": func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		},
		"a host port": func(p *corev1.PodSpec) {
			p.Containers[0].Ports = append(p.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 1, HostPort: 1})
		},
	} {
		p := base.DeepCopy()
		spoil(p)
		if errs := admit(own, *p); len(errs) == 0 {
			t.Errorf("the chart's SCC admits evictd's pod with %s", what)
		}
	}
	// A seccomp profile under an SCC that lists none is refused
	// (hostmount-anyuid's case).
	p := base.DeepCopy()
	p.Containers[0].SecurityContext.Capabilities.Add = nil
	p.Containers[0].SecurityContext.SELinuxOptions = nil
	for _, b := range builtinSCCs {
		if b.name() == "hostmount-anyuid" {
			errs := admit(b, *p)
			if len(errs) == 0 || slices.ContainsFunc(errs, func(e string) bool { return !strings.Contains(e, "seccomp may not be set") }) {
				t.Errorf("hostmount-anyuid on evictd's pod without capabilities or SELinux options: %v; want only its seccomp profile refused", errs)
			}
		}
	}
}
