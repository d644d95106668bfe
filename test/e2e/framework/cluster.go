// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/test/internal/stale"
)

// Config says where a cluster finds its binaries and keeps its files. The
// zero value is ready to use from a test binary in this repository.
type Config struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and (for
	// RealNodes) kube-scheduler. Default: KubeBinDir().
	BinDir string
	// Dir receives the PKI, etcd data, kubeconfigs and logs. Default: a new
	// directory under os.TempDir(), removed by Stop. A given Dir is kept.
	Dir string
	// Manifest is the file whose RBAC objects define evictd's identity.
	// Default: ManifestPath().
	Manifest string
	// Logger receives progress; default: no logging.
	Logger *zap.Logger
	// ReadyTimeout bounds the whole start; default 3 minutes.
	ReadyTimeout time.Duration
	// RealNodes readies the control plane for real kubelets (test/vmnode):
	// kube-scheduler runs, the controller manager also runs the daemonset,
	// replicaset and deployment controllers, and NodeCredentials can issue
	// kubelet identities. The tests that use the kubelet stand-in bind pods
	// to their node themselves and need none of it.
	RealNodes bool
	// Scheduler readies the control plane to place pods on simulated nodes
	// (test/nodesim): kube-scheduler runs, and the controller manager also
	// runs the replicaset and deployment controllers, but not nodelifecycle,
	// which would count a node that sends no heartbeats as lost and taint it
	// unreachable. Since nodelifecycle is also what lifts the not-ready
	// taint that the TaintNodesByCondition admission plugin puts on every
	// new Node, that plugin is off. RealNodes includes the scheduler and the
	// controllers and keeps both nodelifecycle and the plugin.
	Scheduler bool
	// APIServerArgs are added to kube-apiserver's own, for a test of an
	// alpha API (--feature-gates, --runtime-config).
	APIServerArgs []string
	// Controllers are run by the controller manager besides its own
	// (e.g. "job", for a test of a Helm hook Job).
	Controllers []string
	// PriorityAndFairness turns API Priority and Fairness on, as on a real
	// cluster: the API server classifies each request by the FlowSchemas
	// (the manifest's among them) and says which in its response headers.
	// Off otherwise: a test cluster's few clients never load its API
	// server, and the classification and its configuration controller
	// would be more work on a shared test machine for nothing.
	PriorityAndFairness bool
}

// Cluster is a running control plane. Its fields are set by StartCluster and
// must not be changed.
type Cluster struct {
	// Dir holds the logs (etcd.log, kube-apiserver.log,
	// kube-controller-manager.log), the kubeconfigs and the PKI.
	Dir string
	// Server is the API server URL, https://127.0.0.1:PORT.
	Server string
	// CAData is the PEM CA bundle that verifies Server.
	CAData []byte

	// Admin is a client in group system:masters.
	Admin           kubernetes.Interface
	AdminConfig     *rest.Config
	AdminKubeconfig string
	// DocUserKubeconfig is DocUser's: a person with a bearer token and no
	// grant, until a test runs the docs' command that grants one.
	DocUserKubeconfig string

	// EvictdServiceAccount is the ServiceAccount of deploy/daemonset.yaml;
	// its RBAC objects are applied from that file.
	EvictdServiceAccount types.NamespacedName
	// EvictdClient, EvictdConfig and EvictdKubeconfig carry only that
	// ServiceAccount's identity (a TokenRequest token), as a DaemonSet pod
	// would; run evictd as a process with --kubeconfig=EvictdKubeconfig.
	// EvictdAPI is evictd's own client (pkg/kube) on that identity.
	EvictdClient     kubernetes.Interface
	EvictdAPI        *kube.Client
	EvictdConfig     *rest.Config
	EvictdKubeconfig string

	// Egress carries the API server's connections to the kubelets (a
	// RealNodes cluster's only; nil otherwise): a node harness routes its
	// Node's addresses through it.
	Egress *EgressProxy

	// StartDuration is how long StartCluster took.
	StartDuration time.Duration

	log        *zap.Logger
	pki        *pki
	ownDir     bool
	components []*component
	stopOnce   sync.Once
}

// DocUser is the person the docs' examples grant a role to
// (kubectl create clusterrolebinding ... --user=alice).
const DocUser = "alice"

// tempPrefix names cluster directories under os.TempDir() (see package stale).
const tempPrefix = "evictd-cluster"

// Client QPS for the test identities: the client-go default (5) would
// throttle tests that create pods in bulk.
const (
	clientQPS   = 50
	clientBurst = 100
)

// ReadyTimeoutEnv overrides how long StartCluster waits for the control
// plane to serve when Config.ReadyTimeout is not set (a Go duration;
// default 3m). Under the VM's emulation (hack/vm/host-v2.sh) the control
// plane takes minutes to start where the host takes seconds.
const ReadyTimeoutEnv = "EVICTD_E2E_READY_TIMEOUT"

// readyTimeout is ReadyTimeoutEnv's duration, or 3 minutes.
func readyTimeout() (time.Duration, error) {
	v := os.Getenv(ReadyTimeoutEnv)
	if v == "" {
		return 3 * time.Minute, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 10m", ReadyTimeoutEnv, v)
	}
	return d, nil
}

// StartCluster starts etcd, kube-apiserver and kube-controller-manager on
// free loopback ports, waits until they serve, and sets up the admin and
// evictd identities. On error everything started is torn down again.
func StartCluster(ctx context.Context, cfg Config) (c *Cluster, err error) {
	start := time.Now()
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.ReadyTimeout == 0 {
		if cfg.ReadyTimeout, err = readyTimeout(); err != nil {
			return nil, err
		}
	}
	if cfg.BinDir == "" {
		if cfg.BinDir, err = KubeBinDir(); err != nil {
			return nil, err
		}
	}
	bins := map[string]string{}
	for _, name := range controlPlaneBinaries {
		p := filepath.Join(cfg.BinDir, name)
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("no executable %s: %w", p, ErrMissingBinary)
		}
		bins[name] = p
	}
	if cfg.Manifest == "" {
		if cfg.Manifest, err = ManifestPath(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()

	c = &Cluster{log: cfg.Logger, Dir: cfg.Dir}
	if c.Dir == "" {
		if err := stale.Sweep(os.TempDir(), tempPrefix, os.RemoveAll); err != nil {
			c.log.Warn("could not remove a stale cluster directory", zap.Error(err))
		}
		c.Dir = filepath.Join(os.TempDir(), stale.Name(tempPrefix))
		c.ownDir = true
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("start test cluster in %s: %w", c.Dir, err)
			c.Stop()
		}
	}()

	pki, err := writePKI(c.Dir)
	if err != nil {
		return c, err
	}
	c.CAData = pki.caPEM
	c.pki = pki
	adminToken, err := randomToken()
	if err != nil {
		return c, err
	}
	docUserToken, err := randomToken()
	if err != nil {
		return c, err
	}
	tokenFile := filepath.Join(c.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(adminToken+",admin,admin,system:masters\n"+
		docUserToken+","+DocUser+","+DocUser+"\n"), 0o600); err != nil {
		return c, err
	}
	ports, err := FreePorts(3)
	if err != nil {
		return c, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	c.Server = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	if err := c.start("etcd", bins["etcd"],
		"--name=default",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// The data is thrown away after the test; fsync only costs time.
		"--unsafe-no-fsync",
	); err != nil {
		return c, err
	}
	var nodeArgs []string
	if cfg.RealNodes {
		if nodeArgs, err = c.kubeletAccess(); err != nil {
			return c, err
		}
	}
	if err := c.start("kube-apiserver", bins["kube-apiserver"], append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		// A loopback advertise address is refused in the "kubernetes"
		// Endpoints object, so that reconciler is off; nothing here needs it.
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver"),
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pki.saVerifyingKey,
		"--service-account-signing-key-file=" + pki.saSigningKey,
		"--token-auth-file=" + tokenFile,
		// Kubelets (test/vmnode) authenticate with client certificates and
		// are authorized as nodes, the way kubeadm sets up a cluster.
		"--client-ca-file=" + pki.caFile,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--enable-priority-and-fairness=" + strconv.FormatBool(cfg.PriorityAndFairness),
		"--profiling=false",
	}, append(append(apiserverSchedulerArgs(cfg), nodeArgs...), cfg.APIServerArgs...)...)...,
	); err != nil {
		return c, err
	}

	c.AdminConfig = c.restConfig(adminToken)
	if c.Admin, err = kubernetes.NewForConfig(c.AdminConfig); err != nil {
		return c, err
	}
	c.AdminKubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := c.WriteKubeconfig(c.AdminKubeconfig, "admin", adminToken); err != nil {
		return c, err
	}
	c.DocUserKubeconfig = filepath.Join(c.Dir, DocUser+".kubeconfig")
	if err := c.WriteKubeconfig(c.DocUserKubeconfig, DocUser, docUserToken); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", c.apiserverReady); err != nil {
		return c, err
	}
	c.log.Info("kube-apiserver ready", zap.String("server", c.Server), zap.Duration("after", time.Since(start)))

	kcmArgs := []string{"--controllers=disruption,garbagecollector,namespace,serviceaccount,serviceaccount-token,podgc"}
	if cfg.Scheduler && !cfg.RealNodes {
		kcmArgs = []string{"--controllers=disruption,garbagecollector,namespace,serviceaccount,serviceaccount-token,podgc," +
			"replicaset,deployment"}
	}
	if cfg.RealNodes {
		// nodelifecycle lifts the not-ready taint once a kubelet reports
		// Ready. An emulated guest is slow: give its heartbeats room before
		// the node counts as lost.
		kcmArgs = []string{
			"--controllers=disruption,garbagecollector,namespace,serviceaccount,serviceaccount-token,podgc," +
				"daemonset,replicaset,deployment,nodelifecycle,root-ca-certificate-publisher-controller",
			"--node-monitor-grace-period=2m",
		}
	}
	if len(cfg.Controllers) > 0 {
		kcmArgs[0] += "," + strings.Join(cfg.Controllers, ",")
	}
	if err := c.start("kube-controller-manager", bins["kube-controller-manager"], append(kcmArgs,
		"--kubeconfig="+c.AdminKubeconfig,
		"--service-account-private-key-file="+pki.saSigningKey,
		"--root-ca-file="+pki.caFile,
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
	)...); err != nil {
		return c, err
	}
	// The service account controller creating "default" in "default" shows
	// the controller manager has synced its informers and runs controllers.
	if err := c.waitFor(ctx, "kube-controller-manager (default ServiceAccount)", func(ctx context.Context) (bool, error) {
		_, err := c.Admin.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return c, err
	}

	if cfg.RealNodes || cfg.Scheduler {
		sched := filepath.Join(cfg.BinDir, "kube-scheduler")
		if st, err := os.Stat(sched); err != nil || st.Mode()&0o111 == 0 {
			return c, fmt.Errorf("no executable %s: %w", sched, ErrMissingBinary)
		}
		if err := c.start("kube-scheduler", sched,
			"--kubeconfig="+c.AdminKubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
		); err != nil {
			return c, err
		}
	}

	if err := c.setUpEvictdIdentity(ctx, cfg.Manifest); err != nil {
		return c, fmt.Errorf("evictd identity from %s: %w", cfg.Manifest, err)
	}
	c.StartDuration = time.Since(start)
	c.log.Info("test cluster ready", zap.String("dir", c.Dir), zap.Duration("took", c.StartDuration))
	return c, nil
}

// apiserverSchedulerArgs are kube-apiserver's arguments for Config.Scheduler
// without RealNodes: no not-ready taint on new Nodes, since no nodelifecycle
// runs to lift it once they report Ready.
func apiserverSchedulerArgs(cfg Config) []string {
	if !cfg.Scheduler || cfg.RealNodes {
		return nil
	}
	return []string{"--disable-admission-plugins=TaintNodesByCondition"}
}

func (c *Cluster) start(name, bin string, args ...string) error {
	comp, err := startComponent(c.Dir, name, bin, args)
	if err != nil {
		return err
	}
	c.components = append(c.components, comp)
	return nil
}

// waitFor polls cond until it holds, failing early with the log tail when a
// component has exited. Errors from cond are retried: they are expected
// while the servers come up.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, comp := range c.components {
			if err := comp.exitErr(); err != nil {
				return false, err
			}
		}
		ok, err := cond(ctx)
		if err != nil {
			lastErr = err
		}
		return ok, nil
	})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		if lastErr != nil {
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, lastErr)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return err
}

func (c *Cluster) apiserverReady(ctx context.Context) (bool, error) {
	body, err := c.Admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(body)) == "ok", nil
}

func (c *Cluster) restConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            c.Server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData},
		QPS:             clientQPS,
		Burst:           clientBurst,
	}
}

// WriteKubeconfig writes a kubeconfig for this cluster that authenticates as
// user with token.
func (c *Cluster) WriteKubeconfig(path, user, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.CAData}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: user}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// NodeCredentials issues the identity a kubelet of node registers with:
// a kubeconfig (client certificate system:node:NAME in group system:nodes,
// the cluster's CA) that reaches the API server at server, which is how the
// node sees it (a relay on a VM node), not necessarily c.Server.
func (c *Cluster) NodeCredentials(node, server string) ([]byte, error) {
	if c.pki == nil {
		return nil, errors.New("the cluster has no PKI")
	}
	cert, key, err := c.pki.clientCertificate("system:node:"+node, []string{"system:nodes"})
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.CAData}
	kc.AuthInfos[node] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: node}
	kc.CurrentContext = "test"
	return clientcmd.Write(*kc)
}

// Stop stops the processes by their own process groups (SIGTERM, then
// SIGKILL after a grace period) and removes Dir when StartCluster made it.
// It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		// In reverse start order, so that the controller manager does not
		// log a storm of errors about an API server that went first.
		for i := len(c.components) - 1; i >= 0; i-- {
			c.components[i].stop()
		}
		if c.Egress != nil {
			c.Egress.close()
		}
		if c.ownDir {
			if err := os.RemoveAll(c.Dir); err != nil {
				c.log.Warn("could not remove cluster directory", zap.String("dir", c.Dir), zap.Error(err))
			}
		}
	})
}

// LogTails returns the last n lines of every component's log, headed by the
// component name; tests print it when they fail.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	for _, comp := range c.components {
		fmt.Fprintf(&b, "==== %s (%s), last %d lines ====\n%s\n", comp.name, comp.logPath, n, TailFile(comp.logPath, n))
	}
	return b.String()
}

// CreateNamespace creates a namespace named after prefix and its "default"
// ServiceAccount, so pods can be created at once instead of racing the
// service account controller.
func (c *Cluster) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	ns, err := c.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace %s-*: %w", prefix, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	if _, err := c.Admin.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create default ServiceAccount in %s: %w", ns.Name, err)
	}
	return ns.Name, nil
}

// FreePorts asks the kernel for n distinct free loopback ports. They are
// released before use, so another process could take one in between; the
// window is short and a clash shows as a component failing to start.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("no randomness for a token")
	}
	return hex.EncodeToString(b), nil
}

// kubeletAccess starts the egress proxy and writes what the API server
// needs to reach real kubelets through it: the egress selector's
// configuration and a client certificate the kubelets' client CA (this
// cluster's) accepts. It returns the API server's flags for them.
func (c *Cluster) kubeletAccess() ([]string, error) {
	var err error
	if c.Egress, err = startEgressProxy(filepath.Join(c.Dir, "egress.sock"), c.log.Named("egress")); err != nil {
		return nil, err
	}
	egress, err := c.Egress.writeConfig(c.Dir)
	if err != nil {
		return nil, err
	}
	cert, key, err := c.pki.clientCertificate("kube-apiserver-kubelet-client", nil)
	if err != nil {
		return nil, err
	}
	certPath, keyPath := filepath.Join(c.Dir, "apiserver-kubelet-client.crt"), filepath.Join(c.Dir, "apiserver-kubelet-client.key")
	if err := os.WriteFile(certPath, cert, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		return nil, err
	}
	return []string{"--egress-selector-config-file=" + egress,
		"--kubelet-client-certificate=" + certPath, "--kubelet-client-key=" + keyPath,
		// kubeadm's order. The node proxy resolves a Hostname address with the
		// API server's own DNS before it dials (to refuse loopback targets),
		// and the guest's name is in no DNS the host asks.
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname"}, nil
}
