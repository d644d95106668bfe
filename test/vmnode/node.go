// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/test/e2e/framework"
)

// Addresses inside the guest. The guest's side of QEMU user networking is
// 10.0.2.0/24; 10.0.2.100 is where the guest finds the API server (a
// guestfwd to vmagent dial on the host), ServiceIP where its pods do.
const (
	guestAgentPort    = 7000
	guestReadOnlyPort = 10255 // the kubelet's read-only port: /stats/summary without credentials
	guestKubeletPort  = 10250 // the kubelet's own (its default): the API server's way in, for port-forward, logs, exec
	guestAPIAddr      = "10.0.2.100:6443"
	// The pods' network, the CNI bridge plugin's range.
	podSubnet = "10.88.0.0/16"
)

// NodeOptions configure StartNode.
type NodeOptions struct {
	// Cluster is the control plane the kubelet registers with; it must
	// have been started with framework.Config.RealNodes.
	Cluster *framework.Cluster
	// Name is the node's name; default "evictd-vm".
	Name string
	// OutDir receives the node's configs, logs and disk; required.
	OutDir string
	// MemoryMiB and CPUs of the guest; defaults 2048 and 2.
	MemoryMiB, CPUs int
	// DiskMiB is the size of the node's ext4 disk; default 3072.
	DiskMiB int
	// ImageFsMiB, when set, gives the node a second ext4 disk of that size
	// for /var/lib/containerd: a dedicated imagefs, which on containerd
	// also holds the containers' writable layers.
	ImageFsMiB int
	// SwapMiB, when set, gives the node a swap disk of that size, enabled
	// before the kubelet starts, and the kubelet LimitedSwap (Burstable
	// pods may swap, in proportion to their memory request).
	SwapMiB int
	// Images are OCI archives imported into containerd before the
	// kubelet starts (the pause image among them).
	Images []string
	// PauseImage is the sandbox image's reference; required.
	PauseImage string
	// CgroupDriver is the kubelet's and runc's cgroup driver: CgroupFS
	// (the default; the guest's PID 1 is its busybox /init) or Systemd
	// (the guest boots systemd as PID 1, containerd and the kubelet run as
	// its units, the pods in kubepods.slice).
	CgroupDriver string
	// Timeout bounds the VM's whole life; default 40 minutes.
	Timeout time.Duration
	// Logf receives progress; default none.
	Logf func(format string, args ...any)
}

// Node is a running VM node: containerd and a real kubelet in a cgroup v2
// guest, registered with the test cluster.
type Node struct {
	Name    string
	VM      *VM
	Agent   *Agent
	OutDir  string
	Cluster *framework.Cluster
	// ReadOnlyURL is the kubelet's read-only port through a loopback
	// forward: http://127.0.0.1:PORT.
	ReadOnlyURL string
	// Paths of the node's tools as the guest sees them (host paths):
	// containerd, ctr and the runc shim built by hack/build-node.sh,
	// runc and the CNI plugins unpacked by hack/vm/prepare.sh.
	Ctr, Containerd, VMAgent string
	// Kubelet is the kubelet's path: framework.KubeBinDir's, so that make
	// e2e-node-smoke KUBE_VERSION=... runs another release's kubelet.
	Kubelet string
	// path is the PATH under which containerd finds its shim and runc.
	path string
	// StartupTimes records how long each step took.
	StartupTimes []Step
	// Swap: the node has swap (NodeOptions.SwapMiB).
	Swap bool
	// CgroupDriver is NodeOptions.CgroupDriver, defaulted.
	CgroupDriver string

	logf func(string, ...any)
}

// Step is one named stage of StartNode and its duration.
type Step struct {
	Name string
	Took time.Duration
}

// StartNode boots the guest, starts containerd and the kubelet there and
// waits until the Node is Ready in the cluster. On error the VM is killed.
func StartNode(ctx context.Context, o NodeOptions) (n *Node, err error) {
	if o.Cluster == nil || o.OutDir == "" || o.PauseImage == "" {
		return nil, errors.New("vmnode: NodeOptions need Cluster, OutDir and PauseImage")
	}
	if o.Name == "" {
		o.Name = "evictd-vm"
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 2048
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.DiskMiB == 0 {
		o.DiskMiB = 3072
	}
	if o.Timeout == 0 {
		o.Timeout = 40 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.CgroupDriver == "" {
		o.CgroupDriver = CgroupFS
	}
	if o.CgroupDriver != CgroupFS && o.CgroupDriver != Systemd {
		return nil, fmt.Errorf("vmnode: NodeOptions.CgroupDriver %q is neither %q nor %q", o.CgroupDriver, CgroupFS, Systemd)
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	vmDir := DefaultDir()
	bin := filepath.Join(root, "_output", "bin")
	kubeBin, err := framework.KubeBinDir()
	if err != nil {
		return nil, err
	}
	runtime := filepath.Join(vmDir, "node")
	need := []string{
		filepath.Join(kubeBin, "kubelet"), filepath.Join(bin, "vmagent"),
		filepath.Join(bin, "containerd"), filepath.Join(bin, "ctr"), filepath.Join(bin, "containerd-shim-runc-v2"),
		filepath.Join(runtime, "usr", "sbin", "runc"), filepath.Join(runtime, "usr", "lib", "cni", "bridge"),
	}
	systemdLayer := filepath.Join(vmDir, "systemd")
	if o.CgroupDriver == Systemd {
		need = append(need, filepath.Join(systemdLayer, "usr", "lib", "systemd", "systemd"))
	}
	for _, p := range need {
		if !isFile(p) {
			return nil, fmt.Errorf("vmnode: missing %s (make build cluster-bins node-bins, hack/vm/prepare.sh)", p)
		}
	}
	out, err := filepath.Abs(o.OutDir)
	if err != nil {
		return nil, err
	}
	n = &Node{Name: o.Name, OutDir: out, Cluster: o.Cluster, logf: o.Logf, Swap: o.SwapMiB > 0, CgroupDriver: o.CgroupDriver,
		Ctr: filepath.Join(bin, "ctr"), Containerd: filepath.Join(bin, "containerd"),
		VMAgent: filepath.Join(bin, "vmagent"), Kubelet: filepath.Join(kubeBin, "kubelet"), path: nodePath(bin, runtime)}
	began := time.Now()
	step := func(name string, since time.Time) {
		n.StartupTimes = append(n.StartupTimes, Step{name, time.Since(since)})
		o.Logf("node %s: %s in %s", o.Name, name, time.Since(since).Round(time.Millisecond))
	}

	disks := []string{filepath.Join(out, "disk.img")}
	if err := makeDisk(ctx, disks[0], o.DiskMiB, "nodefs"); err != nil {
		return nil, err
	}
	imageFsDisk := ""
	if o.ImageFsMiB > 0 {
		disks = append(disks, filepath.Join(out, "imagefs.img"))
		if err := makeDisk(ctx, disks[1], o.ImageFsMiB, "imagefs"); err != nil {
			return nil, err
		}
		imageFsDisk = "/dev/vdb"
	}
	swapDisk := ""
	if o.SwapMiB > 0 {
		p := filepath.Join(out, "swap.img")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			return nil, err
		}
		if err := os.Truncate(p, int64(o.SwapMiB)<<20); err != nil {
			return nil, err
		}
		disks = append(disks, p)
		swapDisk = "/dev/vd" + string(rune('a'+len(disks)-1))
	}
	if err := n.writeConfigs(o, runtime); err != nil {
		return nil, err
	}
	apiPort, err := portOf(o.Cluster.Server)
	if err != nil {
		return nil, err
	}
	ports, err := framework.FreePorts(3)
	if err != nil {
		return nil, err
	}
	n.Agent = NewAgent(ports[0])
	n.ReadOnlyURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])

	script := strings.Join([]string{
		"export NODE_OUT=" + shellQuote(out),
		"export NODE_DISK=/dev/vda",
		"export NODE_IMAGEFS_DISK=" + imageFsDisk,
		"export NODE_SWAP_DISK=" + swapDisk,
		"export NODE_SERVICE_IP=" + framework.ServiceIP.String(),
		"export NODE_AGENT=" + shellQuote(filepath.Join(bin, "vmagent")),
		"export NODE_AGENT_ARGS=" + shellQuote(fmt.Sprintf("serve --listen=:%d --relay=%s:443=%s",
			guestAgentPort, framework.ServiceIP, guestAPIAddr)),
		"exec sh /host" + filepath.Join(root, "hack", "vm", "node.sh"),
		"",
	}, "\n")
	var kernelArgs []string
	var shares []Share
	if o.CgroupDriver == Systemd {
		kernelArgs = []string{"evictd.init=systemd"}
		shares = []Share{{Tag: systemdShare, Path: systemdLayer}}
	}
	t := time.Now()
	n.VM, err = Start(ctx, Options{
		Dir:        vmDir,
		MemoryMiB:  o.MemoryMiB,
		CPUs:       o.CPUs,
		Script:     script,
		OutDir:     out,
		Timeout:    o.Timeout,
		Disks:      disks,
		KernelArgs: kernelArgs,
		Shares:     shares,
		HostForwards: []HostForward{
			{HostPort: ports[0], GuestPort: guestAgentPort},
			{HostPort: ports[1], GuestPort: guestReadOnlyPort},
			{HostPort: ports[2], GuestPort: guestKubeletPort},
		},
		GuestForwards: []GuestForward{{
			GuestAddr: guestAPIAddr,
			Command:   filepath.Join(bin, "vmagent") + " dial 127.0.0.1:" + strconv.Itoa(apiPort),
		}},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, n.Diagnostics())
			n.VM.Kill()
			_, _ = n.VM.Wait()
		}
	}()
	if err := n.waitAgent(ctx, 3*time.Minute); err != nil {
		return n, err
	}
	step("boot to agent", t)

	t = time.Now()
	if err := n.startContainerd(ctx); err != nil {
		return n, err
	}
	if err := n.poll(ctx, 2*time.Minute, "containerd answering", func(ctx context.Context) error {
		r, err := n.Exec(ctx, []string{n.Ctr, "version"})
		if err != nil {
			return err
		}
		return r.Err()
	}); err != nil {
		return n, err
	}
	step("containerd ready", t)

	t = time.Now()
	for _, img := range o.Images {
		if err := n.ImportImage(ctx, img); err != nil {
			return n, err
		}
	}
	step(fmt.Sprintf("%d images imported", len(o.Images)), t)

	t = time.Now()
	if err := n.StartKubelet(ctx); err != nil {
		return n, err
	}
	if err := n.WaitReady(ctx, 4*time.Minute); err != nil {
		return n, err
	}
	if err := n.routeKubelet(ctx, "127.0.0.1:"+strconv.Itoa(ports[2])); err != nil {
		return n, err
	}
	step("kubelet started, node Ready", t)
	o.Logf("node %s ready in %s", o.Name, time.Since(began).Round(time.Millisecond))
	n.logVersions(ctx, o.Logf)
	return n, nil
}

// systemdShare is the 9p tag of prepare.sh's systemd layer, which
// hack/vm/node.sh mounts and stacks on the host's root.
const systemdShare = "systemd"

// logVersions says which releases met (the API server's and the kubelet's
// own words, as make e2e-node-smoke KUBE_VERSION=... needs them shown), and
// what the kubelet warned about or logged as an error up to Ready.
func (n *Node) logVersions(ctx context.Context, logf func(string, ...any)) {
	if v, err := n.Cluster.Admin.Discovery().ServerVersion(); err == nil {
		logf("node %s: API server %s", n.Name, v.GitVersion)
	} else {
		logf("node %s: API server version: %v", n.Name, err)
	}
	if node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
		i := node.Status.NodeInfo
		logf("node %s: kubelet %s, runtime %s, kernel %s", n.Name, i.KubeletVersion, i.ContainerRuntimeVersion, i.KernelVersion)
	}
	log, err := os.ReadFile(filepath.Join(n.OutDir, "kubelet.log"))
	if err != nil {
		logf("node %s: the kubelet's log: %v", n.Name, err)
		return
	}
	first, total := klogComplaints(log, 20)
	logf("node %s: the kubelet logged %d warnings and errors up to Ready; the first %d:", n.Name, total, len(first))
	for _, l := range first {
		logf("  %s", l)
	}
}

// nodePath is the guest's PATH: the shim from bin (containerd 2 looks it up
// in PATH), runc and the CNI plugins' package tree, then the host's own.
func nodePath(bin, runtime string) string {
	return strings.Join([]string{
		bin, filepath.Join(runtime, "usr", "bin"), filepath.Join(runtime, "usr", "sbin"),
		"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
	}, ":")
}

// env is the environment of the node's daemons and commands.
func (n *Node) env() []string { return []string{"PATH=" + n.path} }

// Exec runs argv in the guest (as root, in the node's root filesystem).
func (n *Node) Exec(ctx context.Context, argv []string, opts ...ExecOption) (*ExecResult, error) {
	return n.Agent.Exec(ctx, argv, append([]ExecOption{WithEnv(n.env()...)}, opts...)...)
}

// Sh runs a busybox shell command line in the guest and fails on a non-zero exit.
func (n *Node) Sh(ctx context.Context, script string) (string, error) {
	r, err := n.Exec(ctx, []string{"/bin/sh", "-c", script}, WithTimeout(2*time.Minute))
	if err != nil {
		return "", err
	}
	return r.Stdout, r.Err()
}

// ImportImage loads an OCI archive (a host path) into containerd's k8s.io
// namespace, where the kubelet finds it, unpacked into the CRI's
// snapshotter. --local: ctr imports in its own process, as containerd 1.x's
// ctr did, naming each image by its io.containerd.image.name annotation;
// containerd 2's ctr otherwise goes through the transfer service, which
// names the images it imports after a prefix of its own.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	r, err := n.Exec(ctx, []string{n.Ctr, "-n", "k8s.io", "images", "import", "--local", "--snapshotter", "overlayfs", archive},
		WithTimeout(5*time.Minute))
	if err != nil {
		return fmt.Errorf("import %s: %w", archive, err)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("import %s: %w", archive, err)
	}
	return nil
}

// startContainerd starts containerd: a daemon of the guest agent, or on a
// systemd node its unit (systemd's answer waits for containerd's READY=1).
func (n *Node) startContainerd(ctx context.Context) error {
	if n.CgroupDriver == Systemd {
		return n.systemctlStart(ctx, containerdUnit)
	}
	if _, err := n.Agent.Spawn(ctx, []string{n.Containerd, "--config", filepath.Join(n.OutDir, "containerd.toml")},
		filepath.Join(n.OutDir, "containerd.log"), n.env()...); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	return nil
}

// systemctlStart starts a unit of a systemd node and names it and its
// status when it does not start.
func (n *Node) systemctlStart(ctx context.Context, unit string) error {
	r, err := n.Exec(ctx, []string{"systemctl", "start", unit}, WithTimeout(6*time.Minute))
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		st, _ := n.Exec(ctx, []string{"systemctl", "status", "--no-pager", "--lines=20", unit})
		status := ""
		if st != nil {
			status = st.Stdout
		}
		return fmt.Errorf("systemctl start %s: %w\n%s", unit, err, status)
	}
	return nil
}

// kubeletCgroup is where the kubelet of a node with swap runs: the
// kubelet gives containers their swap limits only when its own cgroup has a
// memory.swap.max, which the root cgroup (the agent's) has not.
const kubeletCgroup = "/sys/fs/cgroup/kubelet.service"

// StartKubelet starts the kubelet as a daemon of the guest agent (on a
// node with swap, in a cgroup of its own).
func (n *Node) StartKubelet(ctx context.Context) error {
	if n.CgroupDriver == Systemd {
		return n.systemctlStart(ctx, kubeletUnit)
	}
	var wrap []string
	if n.Swap {
		wrap = []string{"/bin/sh", "-c", `mkdir -p "$0" && echo $$ >"$0/cgroup.procs" && shift && exec "$@"`, kubeletCgroup, "-"}
	}
	_, err := n.Agent.Spawn(ctx, append(wrap,
		n.Kubelet,
		"--config="+filepath.Join(n.OutDir, "kubelet.yaml"),
		"--kubeconfig="+filepath.Join(n.OutDir, "kubelet.kubeconfig"),
		"--hostname-override="+n.Name,
		// 3: the eviction manager logs its observations every loop, the
		// evidence of what the kubelet saw in the head-to-head.
		"--v=3",
	), filepath.Join(n.OutDir, "kubelet.log"), n.env()...)
	if err != nil {
		return fmt.Errorf("start the kubelet: %w", err)
	}
	return nil
}

// RestartKubelet restarts a systemd node's kubelet, which reads its
// config again; the pods keep running. A cgroupfs node's kubelet is a
// daemon of the guest agent, which this does not restart.
func (n *Node) RestartKubelet(ctx context.Context) error {
	if n.CgroupDriver != Systemd {
		return fmt.Errorf("restart the kubelet: only on a systemd node, not %s", n.CgroupDriver)
	}
	r, err := n.Exec(ctx, []string{"systemctl", "restart", kubeletUnit}, WithTimeout(2*time.Minute))
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return fmt.Errorf("systemctl restart %s: %w", kubeletUnit, err)
	}
	return nil
}

// routeKubelet sends the API server's connections to the kubelet, at
// every address the Node gives and its kubelet endpoint's port, through
// the cluster's egress proxy to to (the kubelet port's loopback forward),
// and every other to the guest's agent, which dials it inside the guest.
func (n *Node) routeKubelet(ctx context.Context, to string) error {
	if n.Cluster.Egress == nil {
		return errors.New("the cluster has no egress proxy to the kubelets (framework.Config.RealNodes)")
	}
	node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	port := strconv.Itoa(int(node.Status.DaemonEndpoints.KubeletEndpoint.Port))
	if port != strconv.Itoa(guestKubeletPort) {
		return fmt.Errorf("node %s: the kubelet serves on port %s, its forward is for %d", n.Name, port, guestKubeletPort)
	}
	for _, a := range node.Status.Addresses {
		n.Cluster.Egress.Route(net.JoinHostPort(a.Address, port), to)
	}
	// Anything else the API server dials (a pod IP, for its pod proxy) is
	// in the guest: the agent dials it there.
	n.Cluster.Egress.Beyond(n.Agent.Connect)
	return nil
}

// WaitReady waits until the Node reports Ready and the kubelet's
// read-only port answers.
func (n *Node) WaitReady(ctx context.Context, timeout time.Duration) error {
	if err := n.poll(ctx, timeout, "node "+n.Name+" Ready", func(ctx context.Context) error {
		node, err := n.Cluster.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("condition Ready=%s: %s", c.Status, c.Message)
			}
		}
		return errors.New("no Ready condition yet")
	}); err != nil {
		return err
	}
	return n.poll(ctx, timeout, "the kubelet's /healthz", func(ctx context.Context) error {
		_, err := n.get(ctx, "/healthz")
		return err
	})
}

// Summary is the kubelet's /stats/summary.
func (n *Node) Summary(ctx context.Context) (*statsv1alpha1.Summary, []byte, error) {
	body, err := n.get(ctx, "/stats/summary")
	if err != nil {
		return nil, nil, err
	}
	var s statsv1alpha1.Summary
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, body, fmt.Errorf("kubelet /stats/summary: %w", err)
	}
	return &s, body, nil
}

func (n *Node) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.ReadOnlyURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := copyLimited(&b, resp.Body, 64<<20); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kubelet %s: %s: %s", path, resp.Status, firstLine(b.String()))
	}
	return []byte(b.String()), nil
}

// Stop powers the guest off (its disk is thrown away with OutDir).
func (n *Node) Stop() {
	if n == nil || n.VM == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The agent's answer may never come: poweroff ends it.
	_, _ = n.Agent.Exec(ctx, []string{"/bin/busybox", "sh", "-c", "sync; (sleep 1; poweroff -f) >/dev/null 2>&1 &"})
	select {
	case <-n.VM.Done():
	case <-time.After(30 * time.Second):
		n.VM.Kill()
	}
	_, _ = n.VM.Wait()
}

// Diagnostics is what a failed test prints: the tails of the node's logs.
func (n *Node) Diagnostics() string {
	var b strings.Builder
	for _, f := range []string{"vmagent.log", "containerd.log", "kubelet.log"} {
		fmt.Fprintf(&b, "==== %s (last 40 lines) ====\n%s\n", f, framework.TailFile(filepath.Join(n.OutDir, f), 40))
	}
	if n.VM != nil {
		fmt.Fprintf(&b, "==== console (last 30 lines) ====\n%s\n", framework.LastLines(n.VM.Console(), 30))
		fmt.Fprintf(&b, "==== guest: %s\n", n.state())
		if n.CgroupDriver == Systemd {
			fmt.Fprintf(&b, "==== systemd's units ====\n%s\n", n.unitStatus())
		}
	}
	return b.String()
}

// state tells a guest that stopped from one that hangs: whether QEMU still
// runs and, if so, whether the guest agent answers within 10 s.
func (n *Node) state() string {
	select {
	case <-n.VM.Done():
		return "stopped: " + n.ended()
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := n.Agent.Exec(ctx, []string{"/bin/busybox", "cat", "/proc/uptime", "/proc/loadavg"})
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return fmt.Sprintf("QEMU runs; the guest agent does not answer: %v", err)
	}
	return "QEMU runs; the guest agent answers (uptime, load): " + strings.Join(strings.Fields(r.Stdout), " ")
}

// unitStatus is what systemd says of the node's units and of any that
// failed, or why it cannot be asked.
func (n *Node) unitStatus() string {
	select {
	case <-n.VM.Done():
		return "the guest has stopped"
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := n.Exec(ctx, []string{"/bin/sh", "-c",
		"systemctl --no-pager --failed; systemctl status --no-pager --lines=10 vmagent dbus " + containerdUnit + " " + kubeletUnit})
	if err != nil {
		return err.Error()
	}
	return r.Stdout + r.Stderr
}

// ended is how the guest ended, once QEMU has exited.
func (n *Node) ended() string {
	res, err := n.VM.Wait()
	if err != nil {
		return fmt.Sprintf("%v (after %s)", err, res.Duration.Round(time.Second))
	}
	return fmt.Sprintf("its init powered off, script exit code %d (after %s)", res.ExitCode, res.Duration.Round(time.Second))
}

func (n *Node) waitAgent(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- n.Agent.WaitReady(ctx) }()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("the guest agent never answered: %w", err)
		}
		return nil
	case <-n.VM.Done():
		cancel()
		return errors.New("the guest stopped before its agent answered")
	}
}

// poll retries f every second until it succeeds, the timeout passes or the
// VM stops, and then names what it waited for and f's last error.
func (n *Node) poll(ctx context.Context, timeout time.Duration, what string, f func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-n.VM.Done():
			return false, fmt.Errorf("the guest stopped: %s", n.ended())
		default:
		}
		last = f(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, last)
	}
	return nil
}

func makeDisk(ctx context.Context, path string, mib int, label string) error {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return err
	}
	if err := os.Truncate(path, int64(mib)<<20); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", label, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %w: %s", path, err, out)
	}
	return nil
}

func portOf(url string) (int, error) {
	i := strings.LastIndex(url, ":")
	if i < 0 {
		return 0, fmt.Errorf("no port in %s", url)
	}
	return strconv.Atoi(strings.TrimRight(url[i+1:], "/"))
}
