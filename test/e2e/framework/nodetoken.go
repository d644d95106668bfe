// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// NodeNameClaim is the user-info extra key under which the API server puts
// the node of the pod a ServiceAccount token is bound to. The admission
// policies of deploy/daemonset.yaml confine evictd's Node writes to it.
const NodeNameClaim = "authentication.kubernetes.io/node-name"

// EvictdNodeToken returns evictd's identity as its DaemonSet pod on node
// holds it: a token of c.EvictdServiceAccount bound to a pod running on node,
// so that it carries node's name in NodeNameClaim. The unbound token of
// c.EvictdConfig has no such claim, which is what the admission policies
// refuse. The pod, evictd-<node> in the ServiceAccount's namespace, is
// created on the first call for node and reused after; it runs the idle
// workload (no arguments: it holds nothing and waits for a signal), at
// system-node-critical so that evictd never picks it, and tolerates every
// taint so that the node brake cannot push it out. kubeconfig is a file in
// c.Dir carrying the same token, for an evictd process.
func (c *Cluster) EvictdNodeToken(t testing.TB, node string) (cfg *rest.Config, kubeconfig string) {
	t.Helper()
	cfg, kubeconfig, err := c.evictdNodeToken(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, kubeconfig
}

func (c *Cluster) evictdNodeToken(ctx context.Context, node string) (*rest.Config, string, error) {
	_, token, err := BindEvictdToNode(ctx, c.Admin, c.EvictdServiceAccount, node)
	if err != nil {
		return nil, "", err
	}
	kubeconfig := filepath.Join(c.Dir, "evictd-"+node+".kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, "evictd-"+node, token); err != nil {
		return nil, "", err
	}
	return c.restConfig(token), kubeconfig, nil
}

// BindEvictdToNode gives evictd's ServiceAccount sa the identity its
// DaemonSet pod on node holds: it creates (or reuses) the stand-in pod
// evictd-<node> in sa's namespace, on node, and returns it with a token of sa
// bound to it, so that the token carries node's name in NodeNameClaim. admin
// makes both requests. The demo (test/cmd/demo) runs its evictd with such a
// token, as Cluster.EvictdNodeToken's tests do.
func BindEvictdToNode(ctx context.Context, admin kubernetes.Interface, sa types.NamespacedName, node string) (*corev1.Pod, string, error) {
	if node == "" {
		return nil, "", fmt.Errorf("evictd node token: empty node name")
	}
	pods := admin.CoreV1().Pods(sa.Namespace)
	want := evictdNodePod(sa.Namespace, sa.Name, node)
	pod, err := pods.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		pod, err = pods.Get(ctx, want.Name, metav1.GetOptions{})
		if err == nil && pod.Spec.NodeName != node {
			// A pod of that name on another node would give a token
			// naming the wrong node: better no token than a wrong one.
			err = fmt.Errorf("pod %s/%s is bound to node %q, not %q", pod.Namespace, pod.Name, pod.Spec.NodeName, node)
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("evictd pod for node %s: %w", node, err)
	}

	tr, err := admin.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](tokenTTL),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("TokenRequest for %s bound to pod %s/%s: %w", sa, pod.Namespace, pod.Name, err)
	}
	return pod, tr.Status.Token, nil
}

// evictdNodePod is the stand-in for evictd's DaemonSet pod on node.
func evictdNodePod(ns, serviceAccount, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "evictd-" + node, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: serviceAccount,
			PriorityClassName:  "system-node-critical",
			Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			// An empty command runs the workload binary (test/nodesim); with
			// no arguments it allocates nothing and runs until signalled.
			Containers: []corev1.Container{{Name: "evictd", Image: "evictd.test/workload:latest"}},
		},
	}
}
