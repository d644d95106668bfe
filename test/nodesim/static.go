// SPDX-License-Identifier: Apache-2.0

package nodesim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The kubelet's annotations for pods that come from a manifest file.
const (
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
)

// CreateStaticPod plays a static pod: it writes the manifest to
// HostRoot/etc/kubernetes/manifests, then creates its mirror pod in the API
// the way the kubelet does (name suffixed with the node name, the
// config.source/config.hash/config.mirror annotations, owned by the Node).
// The stand-in then runs it like any pod bound to the node. Unlike the
// kubelet, it does not recreate a mirror pod that is deleted.
func (n *Node) CreateStaticPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	p := pod.DeepCopy()
	manifest, err := yaml.Marshal(p)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(n.HostRoot, "etc", "kubernetes", "manifests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, p.Namespace+"_"+p.Name+".yaml"), manifest, 0o644); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(manifest)
	hash := hex.EncodeToString(sum[:16])

	node, err := n.opts.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get Node %s for the mirror pod's owner: %w", n.Name, err)
	}
	p.Name = p.Name + "-" + n.Name
	p.Spec.NodeName = n.Name
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[ConfigSourceAnnotation] = "file"
	p.Annotations[ConfigHashAnnotation] = hash
	p.Annotations[ConfigMirrorAnnotation] = hash
	p.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
	}}
	created, err := n.opts.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create mirror pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return created, nil
}
