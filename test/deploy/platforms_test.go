// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/kubeletcfg"
	"github.com/evictd/evictd/pkg/kubeletplace"
	"github.com/evictd/evictd/pkg/logging"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/pressure"
)

// nodeProc is a process of a fixture node: its /proc/PID/cmdline (argv,
// each argument ended by a NUL, as the kernel shows it) and
// /proc/PID/cgroup.
type nodeProc struct {
	pid    int
	argv   []string
	cgroup string
}

// platformNode is a node laid out as its platform lays it out: the files
// of testdata/nodes/<dir> at their host paths, and the processes written
// into its /proc. Each one's sources are in the preset's comment and in
// docs/install.md, section 3.
type platformNode struct {
	name string
	dir  string
	// preset is presets/<preset>.yaml ("" for the chart's defaults); values
	// are laid over it, as a second -f would be.
	preset, values string
	procs          []nodeProc
	// cgroups are directories of the node's cgroup tree (cgroup v2) under
	// /sys/fs/cgroup, for the observer to find the kubepods cgroup in.
	cgroups []string
	// want is the kubelet's effective hard thresholds as its map spells
	// them; reason, when set, is why evictd must report them unknown.
	want   map[string]string
	reason kubeletcfg.Reason
	// kubepods is the kubepods cgroup the observer must find, when set.
	kubepods string
	// hidden are host paths evictd's pod must not see.
	hidden []string
}

// The node's first process, as systemd shows itself.
var systemd = nodeProc{1, []string{"/usr/lib/systemd/systemd", "--switched-root", "--system", "--deserialize=31"}, "0::/init.scope\n"}

// The platforms of docs/install.md's matrix that evictd runs on, each
// with its kubelet's real command line and config files, as the preset of
// the matrix mounts them.
var platformNodes = []platformNode{
	{
		// GKE's node scripts: ExecStart=/home/kubernetes/bin/kubelet
		// $KUBELET_OPTS, the options in /etc/default/kubelet (testdata).
		name: "gke", dir: "gke", preset: "gke",
		procs: []nodeProc{systemd,
			{812, []string{"/usr/bin/containerd"}, "0::/system.slice/containerd.service\n"},
			{1907, []string{"/home/kubernetes/bin/kubelet", "--v=2", "--cloud-provider=external",
				"--experimental-mounter-path=/home/kubernetes/containerized_mounter/mounter", "--cert-dir=/var/lib/kubelet/pki/",
				"--kubeconfig=/var/lib/kubelet/kubeconfig", "--max-pods=110", "--volume-plugin-dir=/home/kubernetes/flexvolume",
				"--node-status-max-images=25", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
				"--runtime-cgroups=/system.slice/containerd.service", "--registry-qps=10", "--registry-burst=20",
				"--config", "/home/kubernetes/kubelet-config.yaml"}, "0::/system.slice/kubelet.service\n"},
		},
		want:   map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "pid.available": "10%"},
		hidden: []string{"/home/kubernetes/kube-env"},
	},
	{
		// nodeadm: ExecStart=/usr/bin/kubelet $NODEADM_KUBELET_ARGS in
		// Slice=runtime.slice, the arguments in /etc/eks/kubelet/environment;
		// --config-dir because the node group sets kubelet options.
		name: "eks-al2023", dir: "eks-al2023", preset: "eks",
		procs: []nodeProc{systemd,
			{1969, []string{"/usr/bin/kubelet", "--config-dir=/etc/kubernetes/kubelet/config.json.d",
				"--kubeconfig=/var/lib/kubelet/kubeconfig", "--image-credential-provider-bin-dir=/etc/eks/image-credential-provider",
				"--image-credential-provider-config=/etc/eks/image-credential-provider/config.json", "--node-ip=172.31.12.75",
				"--cloud-provider=external", "--hostname-override=ip-172-31-12-75.us-east-2.compute.internal",
				"--config=/etc/kubernetes/kubelet/config.json",
				"--node-labels=eks.amazonaws.com/nodegroup-image=ami-0d39276e3c888c5e5,eks.amazonaws.com/capacityType=ON_DEMAND,eks.amazonaws.com/nodegroup=test"},
				"0::/runtime.slice/kubelet.service\n"},
		},
		want: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
	},
	{
		// Bottlerocket's kubelet.service.d/exec-start.conf; its settings
		// set no eviction-hard, so config has no evictionHard and the
		// kubelet's defaults apply. The empty argument is the one systemd
		// passes for --register-with-taints "".
		name: "eks-bottlerocket", dir: "eks-bottlerocket", preset: "eks",
		procs: []nodeProc{systemd,
			{1155, []string{"/usr/bin/kubelet", "--cloud-provider", "external", "--kubeconfig", "/etc/kubernetes/kubelet/kubeconfig",
				"--config", "/etc/kubernetes/kubelet/config", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
				"--containerd=/run/containerd/containerd.sock", "--root-dir", "/var/lib/kubelet", "--cert-dir", "/var/lib/kubelet/pki",
				"--image-credential-provider-bin-dir", "/usr/libexec/kubernetes/kubelet/plugins",
				"--image-credential-provider-config", "/etc/kubernetes/kubelet/credential-provider-config.yaml",
				"--hostname-override", "ip-192-168-84-28.us-west-2.compute.internal", "--node-ip", "192.168.84.28",
				"--node-labels", "eks.amazonaws.com/nodegroup=ng-bottlerocket,eks.amazonaws.com/capacityType=ON_DEMAND",
				"--register-with-taints", ""}, "0::/runtime.slice/kubelet.service\n"},
		},
		want: kubeletcfg.DefaultHard(),
	},
	{
		// AgentBaker's kubelet.service with KUBELET_CONFIG_FILE_FLAGS
		// (10-componentconfig.conf): --eviction-hard moved into the file.
		name: "aks-config-file", dir: "aks-config-file", preset: "aks",
		procs: []nodeProc{systemd,
			{2210, []string{"/usr/local/bin/kubelet", "--enable-server",
				"--node-labels=agentpool=nodepool1,kubernetes.azure.com/agentpool=nodepool1,kubernetes.azure.com/mode=system,kubernetes.azure.com/os-sku=Ubuntu,kubernetes.azure.com/role=agent",
				"--v=2", "--volume-plugin-dir=/etc/kubernetes/volumeplugins",
				"--kubeconfig", "/var/lib/kubelet/kubeconfig", "--bootstrap-kubeconfig", "/var/lib/kubelet/bootstrap-kubeconfig",
				"--config", "/etc/default/kubeletconfig.json",
				"--runtime-request-timeout=15m", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
				"--runtime-cgroups=/system.slice/containerd.service",
				"--azure-container-registry-config=/etc/kubernetes/azure.json", "--cloud-provider=external", "--node-ip=10.224.0.4",
				"--pod-infra-container-image=mcr.microsoft.com/oss/v2/kubernetes/pause:3.6"}, "0::/system.slice/kubelet.service\n"},
		},
		want: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
	},
	{
		// The same unit without the config file: the thresholds are a flag
		// of $KUBELET_FLAGS, on the command line.
		name: "aks-flags", dir: "aks-flags", preset: "aks",
		procs: []nodeProc{systemd,
			{2210, aksFlagsArgv, "0::/system.slice/kubelet.service\n"},
		},
		want: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
	},
	{
		// Flags mode needs no preset: the matrix says it works as is.
		name: "aks-flags-as-is", dir: "aks-flags",
		procs: []nodeProc{systemd,
			{2210, aksFlagsArgv, "0::/system.slice/kubelet.service\n"},
		},
		want: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
	},
	{
		// The MCO's kubelet.service (4.21+ workers): kubenswrapper and
		// kubensenter exec the kubelet, whose argv[0] stays /usr/bin/kubelet;
		// kubelet.conf sets no evictionHard, so the kubelet's defaults,
		// and a drop-in of the node's sizing.
		name: "openshift-worker", dir: "openshift-worker", preset: "openshift",
		procs: []nodeProc{systemd,
			{1204, []string{"/usr/bin/crio"}, "0::/system.slice/crio.service\n"},
			{2316, openshiftArgv("node-role.kubernetes.io/worker", true), "0::/system.slice/kubelet.service\n"},
		},
		want:   kubeletcfg.DefaultHard(),
		hidden: []string{"/etc/kubernetes/kubeconfig"},
	},
	{
		// A 4.22 control plane: no --config-dir and no kubelet.conf.d yet.
		// The unchecked mount still lets the pod start.
		name: "openshift-control-plane-4.22", dir: "openshift-control-plane-4.22", preset: "openshift",
		procs: []nodeProc{systemd,
			{2316, openshiftArgv("node-role.kubernetes.io/control-plane,node-role.kubernetes.io/master", false), "0::/system.slice/kubelet.service\n"},
		},
		want:   kubeletcfg.DefaultHard(),
		hidden: []string{"/etc/kubernetes/kubeconfig", "/etc/kubernetes/static-pod-resources"},
	},
	{
		// k0s's supervisor starts the kubelet (a controller with
		// --enable-worker here) under its own unit; the worker profile sets
		// no evictionHard.
		name: "k0s", dir: "k0s", preset: "k0s",
		procs: []nodeProc{systemd,
			{988, []string{"/usr/local/bin/k0s", "controller", "--enable-worker"}, "0::/system.slice/k0scontroller.service\n"},
			{1530, []string{"/var/lib/k0s/bin/kubelet", "--node-labels=node.k0sproject.io/role=control-plane",
				"--runtime-cgroups=/system.slice/containerd.service", "--hostname-override=k0s-0", "--root-dir=/var/lib/k0s/kubelet",
				"--config=/run/k0s/kubelet/config.yaml", "--kubeconfig=/run/k0s/kubelet-direct.conf", "--v=1",
				"--cert-dir=/var/lib/k0s/kubelet/pki", "--containerd=/run/k0s/containerd.sock"}, "0::/system.slice/k0scontroller.service\n"},
		},
		want: kubeletcfg.DefaultHard(),
	},
	{
		// rke2's kubelet, its child process in its unit's cgroup, with
		// only --config-dir: no --config, so nothing but the drop-in's
		// evictionHard.
		name: "rke2", dir: "rke2", preset: "rke2",
		procs: []nodeProc{systemd,
			{1594, []string{"/usr/local/bin/rke2 server"}, "0::/system.slice/rke2-server.service\n"},
			{2057, []string{"kubelet", "--volume-plugin-dir=/var/lib/kubelet/volumeplugins", "--file-check-frequency=5s",
				"--sync-frequency=30s", "--cloud-provider=external", "--config-dir=/var/lib/rancher/rke2/agent/etc/kubelet.conf.d",
				"--containerd=/run/k3s/containerd/containerd.sock", "--hostname-override=rke2-0",
				"--kubeconfig=/var/lib/rancher/rke2/agent/kubelet.kubeconfig", "--node-ip=10.201.248.21", "--node-labels=",
				"--read-only-port=0"}, "0::/system.slice/rke2-server.service\n"},
		},
		want: map[string]string{"imagefs.available": "5%", "nodefs.available": "5%"},
	},
	{
		// k3s runs the kubelet inside its own process: unknown, and said
		// so.
		name: "k3s", dir: "k3s", preset: "k3s",
		procs: []nodeProc{systemd,
			{741, []string{"/usr/local/bin/k3s server", "", ""}, "0::/system.slice/k3s.service\n"},
		},
		reason: kubeletcfg.ReasonEmbedded,
	},
	{
		// What docs/install.md offers k3s 1.32+ nodes whose kubelet takes
		// no eviction --kubelet-arg: its defaults drop-in as the config.
		name: "k3s-defaults-file", dir: "k3s", preset: "k3s",
		values: "kubeletConfig: {hostPath: /var/lib/rancher/k3s/agent/etc/kubelet.conf.d, file: /var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf}",
		procs: []nodeProc{systemd,
			{741, []string{"/usr/local/bin/k3s server", "", ""}, "0::/system.slice/k3s.service\n"},
		},
		want: map[string]string{"imagefs.available": "5%", "nodefs.available": "5%"},
	},
	{
		// MicroK8s' kubelite, started with its arguments file: unknown,
		// and said so.
		name: "microk8s", dir: "microk8s", preset: "microk8s",
		procs: []nodeProc{systemd,
			{1322, []string{"/snap/microk8s/8148/kubelite", "--scheduler-args-file=/var/snap/microk8s/8148/args/kube-scheduler",
				"--controller-manager-args-file=/var/snap/microk8s/8148/args/kube-controller-manager",
				"--proxy-args-file=/var/snap/microk8s/8148/args/kube-proxy", "--kubelet-args-file=/var/snap/microk8s/8148/args/kubelet",
				"--apiserver-args-file=/var/snap/microk8s/8148/args/kube-apiserver", "--kubeconfig-file=/var/snap/microk8s/8148/credentials/client.config",
				"--start-control-plane=true"}, "0::/system.slice/snap.microk8s.daemon-kubelite.service\n"},
		},
		reason: kubeletcfg.ReasonEmbedded,
	},
	{
		// kind's node container (its own cgroup namespace): kubeadm's
		// kubelet with cgroupRoot /kubelet and the systemd driver, so the
		// pods under /kubelet.slice/kubelet-kubepods.slice.
		name: "kind", dir: "kind", preset: "kind",
		procs: []nodeProc{systemd,
			{96, []string{"/usr/local/bin/containerd"}, "0::/system.slice/containerd.service\n"},
			{231, []string{"/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
				"--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml",
				"--container-runtime-endpoint=unix:///run/containerd/containerd.sock", "--node-ip=172.18.0.2", "--node-labels=",
				"--pod-infra-container-image=registry.k8s.io/pause:3.10.1", "--provider-id=kind://docker/kind/kind-control-plane",
				"--runtime-cgroups=/system.slice/containerd.service"}, "0::/system.slice/kubelet.service\n"},
		},
		cgroups: []string{"init.scope", "system.slice/kubelet.service", "system.slice/containerd.service", "kubelet",
			"kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice", "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice"},
		want:     map[string]string{"imagefs.available": "0%", "nodefs.available": "0%", "nodefs.inodesFree": "0%"},
		kubepods: "/kubelet.slice/kubelet-kubepods.slice",
	},
}

// AKS's kubelet without the config file: $KUBELET_FLAGS of
// testdata/nodes/aks-flags/etc/default/kubelet, split at whitespace by
// systemd.
var aksFlagsArgv = []string{"/usr/local/bin/kubelet", "--enable-server",
	"--node-labels=agentpool=nodepool1,kubernetes.azure.com/agentpool=nodepool1,kubernetes.azure.com/mode=system,kubernetes.azure.com/os-sku=Ubuntu,kubernetes.azure.com/role=agent",
	"--v=2", "--volume-plugin-dir=/etc/kubernetes/volumeplugins",
	"--kubeconfig", "/var/lib/kubelet/kubeconfig", "--bootstrap-kubeconfig", "/var/lib/kubelet/bootstrap-kubeconfig",
	"--runtime-request-timeout=15m", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
	"--runtime-cgroups=/system.slice/containerd.service",
	"--address=0.0.0.0", "--anonymous-auth=false", "--authentication-token-webhook=true", "--authorization-mode=Webhook",
	"--azure-container-registry-config=/etc/kubernetes/azure.json", "--cgroups-per-qos=true", "--client-ca-file=/etc/kubernetes/certs/ca.crt",
	"--cloud-provider=external", "--cluster-dns=10.0.0.10", "--cluster-domain=cluster.local", "--container-log-max-size=50M",
	"--enforce-node-allocatable=pods", "--event-qps=0", "--eviction-hard=memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%",
	"--feature-gates=RotateKubeletServerCertificate=true", "--image-gc-high-threshold=85", "--image-gc-low-threshold=80",
	"--kube-reserved=cpu=100m,memory=1843Mi", "--max-pods=110", "--node-ip=10.224.0.5", "--node-status-update-frequency=10s",
	"--pod-infra-container-image=mcr.microsoft.com/oss/v2/kubernetes/pause:3.6", "--pod-manifest-path=/etc/kubernetes/manifests",
	"--pod-max-pids=-1", "--protect-kernel-defaults=true", "--read-only-port=0", "--resolv-conf=/run/systemd/resolve/resolv.conf",
	"--rotate-certificates=true", "--streaming-connection-idle-timeout=4h", "--tls-cert-file=/etc/kubernetes/certs/kubeletserver.crt",
	"--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_128_GCM_SHA256",
	"--tls-private-key-file=/etc/kubernetes/certs/kubeletserver.key"}

// openshiftArgv is the MCO unit's kubelet command line on AWS, its
// environment expanded; configDir: the node's unit passes --config-dir.
func openshiftArgv(roles string, configDir bool) []string {
	argv := []string{"/usr/bin/kubelet", "--config=/etc/kubernetes/kubelet.conf"}
	if configDir {
		argv = append(argv, "--config-dir=/etc/openshift/kubelet.conf.d")
	}
	return append(argv, "--bootstrap-kubeconfig=/etc/kubernetes/kubeconfig", "--kubeconfig=/var/lib/kubelet/kubeconfig",
		"--container-runtime-endpoint=/var/run/crio/crio.sock", "--runtime-cgroups=/system.slice/crio.service",
		"--node-labels="+roles+",node.openshift.io/os_id=rhel,", "--node-ip=0.0.0.0", "--minimum-container-ttl-duration=6m0s",
		"--volume-plugin-dir=/etc/kubernetes/kubelet-plugins/volume/exec", "--cloud-provider=external",
		"--image-credential-provider-bin-dir=/usr/libexec/kubelet-image-credential-provider-plugins",
		"--image-credential-provider-config=/etc/kubernetes/credential-providers/ecr-credential-provider.yaml",
		"--hostname-override=ip-10-0-21-118.ec2.internal", "--provider-id=aws:///us-east-1a/i-0a1b2c3d4e5f60718", "--v=2")
}

// TestPlatformPresets: on each platform of docs/install.md's matrix that
// evictd runs on, the release rendered with the platform's preset mounts
// what evictd needs to read the node's kubelet, and no more: from a node
// laid out as the platform lays it out (the kubelet's real command line in
// /proc, its config files at their real paths with the platform's shipped
// thresholds), the container's view of the host is built from the
// DaemonSet's hostPath volumes and mounts alone (each type checked as the
// kubelet checks it), and evictd's own reader, with the options the
// container's arguments give it, finds the kubelet's hard thresholds as
// that kubelet has them; where the matrix says they stay unknown, it says
// so, for that reason. On kind the observer must also find the pods'
// cgroup.
func TestPlatformPresets(t *testing.T) {
	for _, n := range platformNodes {
		t.Run(n.name, func(t *testing.T) {
			values := n.values
			if n.preset != "" {
				preset, err := os.ReadFile(repoPath(t, "deploy", "helm", "evictd", "presets", n.preset+".yaml"))
				if err != nil {
					// Go on with the chart's defaults, to say what they give.
					t.Errorf("no preset %s: %v; the chart's defaults below", n.preset, err)
				}
				values = layValues(t, string(preset), n.values)
			}
			objs, err := render(t, values)
			if err != nil {
				t.Fatalf("render with presets/%s.yaml: %v", n.preset, err)
			}
			pod, args := daemonSetPod(t, objs)
			node := fixtureNode(t, n)
			o := runOptions(t, args)
			view := containerView(t, node, pod)
			hostRoot := filepath.Join(view, o.HostRoot)

			for _, h := range n.hidden {
				if _, err := os.Lstat(filepath.Join(hostRoot, h)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s is visible to evictd's pod (%v); it must not be mounted", h, err)
				}
			}
			if o.KubeletThresholds != options.KubeletPlace {
				t.Errorf("the pod runs with --kubelet-thresholds=%s; want %s", o.KubeletThresholds, options.KubeletPlace)
			}
			res, err := kubeletcfg.Read(kubeletcfg.Options{HostRoot: hostRoot, ConfigPath: o.KubeletConfig})
			switch {
			case n.reason != "":
				if err == nil || kubeletcfg.ReasonOf(err) != n.reason {
					t.Errorf("evictd read the kubelet's thresholds: %+v, %v; want them unknown (%s)", res, err, n.reason)
				}
			case err != nil:
				t.Errorf("evictd reports the kubelet's thresholds unknown (%s): %v\nits fix: %s", kubeletcfg.ReasonOf(err), err, kubeletplace.Fix(err))
			default:
				if d := cmp.Diff(n.want, res.Raw); d != "" {
					t.Errorf("the kubelet's hard thresholds as evictd reads them (from %s) (-the kubelet's +evictd's):\n%s", res.From, d)
				}
			}

			if n.kubepods != "" {
				obs, err := pressure.NewObserver(pressure.Options{HostRoot: hostRoot, CgroupRoot: o.CgroupRoot, NodeCgroup: o.NodeCgroup,
					ImageFsPath: o.ImageFs, ContainerFsPath: o.ContainerFs}, nil)
				if err != nil {
					t.Fatalf("observer: %v", err)
				}
				defer obs.Close()
				if got := obs.Layout().KubepodsCgroup; got != n.kubepods {
					t.Errorf("the observer finds the kubepods cgroup at %q under --cgroup-root=%s; want %s", got, o.CgroupRoot, n.kubepods)
				}
			}
		})
	}
}

// layValues lays the values YAML over over base, as Helm lays a second -f
// over the first: maps merged key by key, anything else replaced.
func layValues(t *testing.T, base, over string) string {
	t.Helper()
	var b, o map[string]any
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(over), &o); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(mergeValues(b, o))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func mergeValues(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeValues(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// daemonSetPod is the rendered DaemonSet's pod template and its agent
// container's arguments.
func daemonSetPod(t *testing.T, objs []*unstructured.Unstructured) (*corev1.PodSpec, []string) {
	t.Helper()
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "DaemonSet", "evictd").Object, &ds); err != nil {
		t.Fatal(err)
	}
	pod := &ds.Spec.Template.Spec
	return pod, pod.Containers[0].Args
}

// runOptions parses the container's arguments (`evictd run ...`) with
// evictd's own flags.
func runOptions(t *testing.T, args []string) *options.Options {
	t.Helper()
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("the container runs %v; want evictd run", args)
	}
	o := options.NewOptions()
	s := &cliflag.Sections{}
	o.AddFlags(s)
	var format, level string
	logging.AddFlags(s.Section(options.SectionLogging), &format, &level)
	if err := s.FlagSet("run").Parse(args[1:]); err != nil {
		t.Fatalf("evictd run %v: %v", args[1:], err)
	}
	return o
}

// fixtureNode lays out the node n in a temporary directory: its files,
// its /proc and its cgroup tree.
func fixtureNode(t *testing.T, n platformNode) string {
	t.Helper()
	root := t.TempDir()
	src := repoPath(t, "test", "deploy", "testdata", "nodes", n.dir)
	if err := copyTree(src, root); err != nil {
		t.Fatalf("node %s: %v", n.dir, err)
	}
	write := func(p, content string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range n.procs {
		dir := filepath.Join("proc", strconv.Itoa(p.pid))
		write(filepath.Join(dir, "cmdline"), strings.Join(p.argv, "\x00")+"\x00")
		write(filepath.Join(dir, "cgroup"), p.cgroup)
	}
	write("proc/meminfo", "MemTotal:        8135068 kB\nMemFree:         5240312 kB\nMemAvailable:    6876540 kB\n")
	write("proc/sys/kernel/hostname", n.name+"\n")
	write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
	for _, cg := range n.cgroups {
		write(filepath.Join("sys/fs/cgroup", cg, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n")
	}
	for _, d := range []string{"var/lib/kubelet", "var/log/pods", "var/lib/containerd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// containerView builds, in a temporary directory standing for the
// container's /, what the pod's hostPath mounts show of node: each volume's
// host path copied to its mount path, parents before what is nested in
// them (the container runtime's order), a nested mount hiding what its
// parent has there. The kubelet's checks of a volume's type come first:
// Directory and File must be there and be one (else the pod never starts
// on the node, a failure here); an unchecked ("") one the runtime makes,
// as an empty directory, when missing.
func containerView(t *testing.T, node string, pod *corev1.PodSpec) string {
	t.Helper()
	view := t.TempDir()
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mounts := slices.Clone(pod.Containers[0].VolumeMounts)
	slices.SortStableFunc(mounts, func(a, b corev1.VolumeMount) int {
		return strings.Count(filepath.Clean(a.MountPath), "/") - strings.Count(filepath.Clean(b.MountPath), "/")
	})
	for _, m := range mounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Fatalf("mount %s names no volume", m.Name)
		}
		if v.HostPath == nil {
			continue
		}
		src := filepath.Join(node, v.HostPath.Path)
		dst := filepath.Join(view, m.MountPath)
		typ := corev1.HostPathUnset
		if v.HostPath.Type != nil {
			typ = *v.HostPath.Type
		}
		fi, err := os.Stat(src)
		switch {
		case typ == corev1.HostPathDirectory && (err != nil || !fi.IsDir()):
			t.Fatalf("volume %s: hostPath %s, type Directory, is not a directory on the node (%v): the pod never starts there", m.Name, v.HostPath.Path, err)
		case typ == corev1.HostPathFile && (err != nil || !fi.Mode().IsRegular()):
			t.Fatalf("volume %s: hostPath %s, type File, is not a file on the node (%v): the pod never starts there", m.Name, v.HostPath.Path, err)
		case typ == corev1.HostPathUnset && errors.Is(err, fs.ErrNotExist):
			if err := os.MkdirAll(src, 0o755); err != nil {
				t.Fatal(err)
			}
		case typ != corev1.HostPathDirectory && typ != corev1.HostPathFile && typ != corev1.HostPathUnset:
			t.Fatalf("volume %s: hostPath type %q, which this test does not model", m.Name, typ)
		}
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
		if err := copyTree(src, dst); err != nil {
			t.Fatalf("mount %s: %v", m.Name, err)
		}
	}
	return view
}

// copyTree copies src, a file or a directory tree, to dst, symbolic links
// as links (a link's target is the host's, resolved by evictd under its
// host root).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
