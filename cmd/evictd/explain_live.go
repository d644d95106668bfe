// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/kube"
)

// liveFlags are explain's flags for a running agent (--node).
type liveFlags struct {
	node, kubeconfig, namespace, selector, address string
	caFile, tokenFile                              string
	insecure                                       bool
	timeout                                        time.Duration
}

// The secure port's container port name in the chart and the kustomize
// base; its number is read from the pod.
const securePortName = "secure"

func (f *liveFlags) bind(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}, nodeUsage string) {
	fs.StringVar(&f.node, "node", "", nodeUsage)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the caller (default: $KUBECONFIG or ~/.kube/config).")
	fs.StringVar(&f.namespace, "namespace", "evictd-system", "Namespace of evictd's pods.")
	fs.StringVar(&f.selector, "selector", "app.kubernetes.io/name=evictd", "Label selector of evictd's pods.")
	fs.StringVar(&f.address, "address", "", "Reach the agent at HOST:PORT instead of its pod's IP (a kubectl port-forward's local end).")
	fs.StringVar(&f.caFile, "certificate-authority", "", "CA file that signed the agent's serving certificate (--tls-cert-file).")
	fs.StringVar(&f.tokenFile, "token-file", "", "File holding the bearer token to send (default: the kubeconfig user's).")
	fs.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "Send the token to the agent without checking its certificate (not needed for a loopback --address).")
	fs.DurationVar(&f.timeout, "request-timeout", 30*time.Second, "How long to wait for the cluster and the agent.")
}

// explainLive fetches the running agent's explanation.
func explainLive(ctx context.Context, f liveFlags) (agent.Live, error) {
	body, addr, err := agentGet(ctx, f, "/explain", 64<<20)
	if err != nil {
		return agent.Live{}, err
	}
	var live agent.Live
	if err := json.Unmarshal(body, &live); err != nil {
		return agent.Live{}, fmt.Errorf("agent at %s: its explanation is not JSON: %w", addr, err)
	}
	if f.node != "" && live.Node != f.node {
		return agent.Live{}, fmt.Errorf("agent at %s explains node %q, not %q", addr, live.Node, f.node)
	}
	return live, nil
}

// agentGet gets path from the running agent on f.node (or at f.address)
// as the kubeconfig's user, at most limit bytes, and returns the body and
// the address it asked.
func agentGet(ctx context.Context, f liveFlags, path string, limit int64) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: f.kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	addr := f.address
	if addr == "" {
		if addr, err = agentAddress(ctx, cfg, f); err != nil {
			return nil, "", err
		}
	}
	client, err := agentClient(cfg, f, addr)
	if err != nil {
		return nil, addr, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return nil, addr, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, addr, fmt.Errorf("agent at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, addr, fmt.Errorf("agent at %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, addr, fmt.Errorf("agent at %s answered %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	if int64(len(body)) > limit {
		return nil, addr, fmt.Errorf("agent at %s: %s is over %d bytes", addr, path, limit)
	}
	return body, addr, nil
}

// agentAddress is the pod IP and secure port of the running agent on
// f.node.
func agentAddress(ctx context.Context, cfg *rest.Config, f liveFlags) (string, error) {
	c, err := kube.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	obj, err := c.List(ctx, kube.Pods, metav1.ListOptions{LabelSelector: f.selector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", f.node).String()})
	if err != nil {
		return "", fmt.Errorf("listing evictd's pods on node %q: %w", f.node, err)
	}
	var running []corev1.Pod
	for _, p := range obj.(*corev1.PodList).Items {
		if p.Namespace == f.namespace && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return "", fmt.Errorf("no running pod of evictd (namespace %q, selector %q) on node %q", f.namespace, f.selector, f.node)
	}
	// Several during a rollout: any answers for the node (the one standing
	// by says so).
	p := running[0]
	if p.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s/%s has no IP yet", p.Namespace, p.Name)
	}
	for _, ctr := range p.Spec.Containers {
		for _, port := range ctr.Ports {
			if port.Name == securePortName {
				return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort))), nil
			}
		}
	}
	return "", fmt.Errorf("pod %s/%s has no container port named %q: is its secure port on (--secure-bind-address)?",
		p.Namespace, p.Name, securePortName)
}

// agentClient sends the caller's bearer token to addr over TLS. The
// agent's certificate is self-signed unless the operator gave one: it is
// checked against --certificate-authority; without one, only on a
// loopback address (a port-forward, whose tunnel the API server and the
// kubelet authenticate) or with --insecure-skip-tls-verify is it not.
func agentClient(cfg *rest.Config, f liveFlags, addr string) (*http.Client, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("invalid --address %q: want HOST:PORT", addr)
	}
	switch {
	case f.caFile != "":
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--certificate-authority: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--certificate-authority %q: no PEM certificate in it", f.caFile)
		}
		tlsCfg.RootCAs = pool
	case f.insecure || isLoopback(host):
		tlsCfg.InsecureSkipVerify = true
	default:
		return nil, fmt.Errorf("the agent at %s serves a certificate evictd cannot check: pass --certificate-authority FILE, "+
			"reach it through kubectl port-forward with --address 127.0.0.1:PORT, or --insecure-skip-tls-verify to send your token unchecked", addr)
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	if f.tokenFile != "" {
		tc.BearerToken, tc.BearerTokenFile = "", f.tokenFile
		if _, err := os.Stat(f.tokenFile); err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
	}
	if !tc.HasTokenAuth() && tc.WrapTransport == nil {
		return nil, errors.New("the kubeconfig's user has no bearer token (a client certificate, say), and the agent takes only tokens: " +
			"pass --token-file FILE (kubectl create token gives one)")
	}
	// Only the caller's identity is taken from the kubeconfig: its TLS
	// settings are the API server's, not the agent's.
	tc.TLS = transport.TLSConfig{}
	tc.Impersonate = transport.ImpersonationConfig{}
	rt, err := transport.HTTPWrappersForConfig(tc, &http.Transport{TLSClientConfig: tlsCfg, Proxy: nil})
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: f.timeout}, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
