// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/pkg/kube"
)

// identityKinds are the objects of the manifest that make up evictd's
// identity; StartCluster applies exactly these, for real.
var identityKinds = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:      true,
	{Kind: "ServiceAccount"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:        true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:               true,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        true,
	// The admission policies bound evictd's Node writes and evictions to
	// its own node: a test of those writes must meet them as a cluster
	// installed from the manifest would.
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	// evictd's priority level under API Priority and Fairness and the
	// FlowSchema that classifies its ServiceAccounts' requests into it: in
	// force wherever a test turns API Priority and Fairness on
	// (WithPriorityAndFairness), as on a cluster installed from the
	// manifest.
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}: true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                 true,
}

// EvictionPolicy names the manifest's admission policy, and its binding,
// that refuses evictions by evictd's ServiceAccount with a token not bound
// to a pod. LeasePolicy names the one that lets that ServiceAccount write
// only the Lease evictd-<node> of the node its token is bound to, which a
// token not bound to a pod has none of. StartCluster leaves these out: the
// tests run evictd (which takes its node's Lease) and its Evictor on
// EvictdConfig, a token of the ServiceAccount alone, which both refuse.
// EnforcePolicy applies one of them for a test.
const (
	EvictionPolicy = "evictd-evictions"
	LeasePolicy    = "evictd-leases"
	// EvictionRequestPolicy lets that ServiceAccount write only the
	// EvictionRequests labelled with its token's node.
	EvictionRequestPolicy = "evictd-eviction-requests"
)

// onRequestPolicies are the policies StartCluster does not apply.
var onRequestPolicies = []string{EvictionPolicy, LeasePolicy, EvictionRequestPolicy}

// IsIdentityObject reports whether StartCluster applied obj (a Namespace,
// ServiceAccount, RBAC object or ValidatingAdmissionPolicy of the manifest,
// or a binding of such a policy, the FlowSchema or its
// PriorityLevelConfiguration), which it does for all of them but
// onRequestPolicies'.
func IsIdentityObject(obj *unstructured.Unstructured) bool {
	return identityKinds[obj.GroupVersionKind().GroupKind()] &&
		!slices.ContainsFunc(onRequestPolicies, func(name string) bool { return isPolicy(obj, name) })
}

// isPolicy reports whether obj is the ValidatingAdmissionPolicy name or
// its binding (of the same name).
func isPolicy(obj *unstructured.Unstructured, name string) bool {
	gk := obj.GroupVersionKind().GroupKind()
	return gk.Group == "admissionregistration.k8s.io" && obj.GetName() == name &&
		(gk.Kind == "ValidatingAdmissionPolicy" || gk.Kind == "ValidatingAdmissionPolicyBinding")
}

// EnforceEvictionPolicy applies EvictionPolicy, after which the API server
// refuses evictions by EvictdConfig (allowing those with a token of
// EvictdNodeToken).
func (c *Cluster) EnforceEvictionPolicy(ctx context.Context) error {
	return c.EnforcePolicy(ctx, EvictionPolicy)
}

// EnforcePolicy applies the policy name (one StartCluster leaves out:
// EvictionPolicy or LeasePolicy) and its binding from ManifestPath(). The
// policy takes effect a moment after the call returns: the API server
// loads policies through an informer.
func (c *Cluster) EnforcePolicy(ctx context.Context, name string) error {
	if !slices.Contains(onRequestPolicies, name) {
		return fmt.Errorf("policy %q: StartCluster applies it already, or the manifest has no such policy (want one of %v)", name, onRequestPolicies)
	}
	manifest, err := ManifestPath()
	if err != nil {
		return err
	}
	objs, err := ReadManifest(manifest)
	if err != nil {
		return err
	}
	n := 0
	for _, obj := range objs {
		if !isPolicy(obj, name) {
			continue
		}
		if err := c.apply(ctx, obj); err != nil {
			return err
		}
		n++
	}
	if n != 2 {
		return fmt.Errorf("%s: want the policy %s and its binding, found %d objects of that name", manifest, name, n)
	}
	return nil
}

// ApplyFile applies every object of the manifest at path, as
// `kubectl apply -f path` would (server-side here), and returns them.
// For the opt-in manifests beside deploy/daemonset.yaml, which no
// cluster applies at start.
func (c *Cluster) ApplyFile(ctx context.Context, path string) ([]*unstructured.Unstructured, error) {
	objs, err := ReadManifest(path)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s: no objects to apply", path)
	}
	for _, obj := range objs {
		if err := c.apply(ctx, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return objs, nil
}

// apply creates or updates obj with the admin's server-side apply: the
// same call works on a fresh cluster and on one a previous start left
// objects in.
func (c *Cluster) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	ri, err := c.ResourceFor(obj)
	if err != nil {
		return err
	}
	if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "evictd-e2e", Force: true}); err != nil {
		return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// tokenTTL is long enough for any test or demo session.
const tokenTTL = 24 * 60 * 60

// ReadManifest parses a multi-document YAML file into objects, skipping
// empty documents.
func ReadManifest(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	objs, err := ParseManifest(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// ParseManifest parses a multi-document YAML stream into objects, skipping
// empty documents; every object must have a kind and an apiVersion.
func ParseManifest(in io.Reader) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(in))
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 { // only comments
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document %d has no kind or apiVersion", i)
		}
		objs = append(objs, obj)
	}
}

// ResourceFor returns the admin's dynamic client for obj's resource, in
// obj's namespace when the resource is namespaced.
func (c *Cluster) ResourceFor(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	dyn, err := dynamic.NewForConfig(c.AdminConfig)
	if err != nil {
		return nil, err
	}
	gvk := obj.GroupVersionKind()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Admin.Discovery()))
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	if m.Scope.Name() == "namespace" {
		return dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return dyn.Resource(m.Resource), nil
}

func (c *Cluster) setUpEvictdIdentity(ctx context.Context, manifest string) error {
	objs, err := ReadManifest(manifest)
	if err != nil {
		return err
	}
	// evictd's identity is the ServiceAccount its DaemonSet runs as; the
	// manifest has another, evictd cleanup's (for an uninstall). A manifest
	// with no DaemonSet (a test's own identity) has one ServiceAccount.
	agentSA, err := daemonSetServiceAccount(objs)
	if err != nil {
		return err
	}
	var sas []types.NamespacedName
	for _, obj := range objs {
		if !IsIdentityObject(obj) {
			continue
		}
		if err := c.apply(ctx, obj); err != nil {
			return err
		}
		if obj.GetKind() == "ServiceAccount" && (agentSA == "" || obj.GetName() == agentSA) {
			sas = append(sas, types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
	}
	if len(sas) != 1 {
		return fmt.Errorf("want exactly one ServiceAccount for evictd (the DaemonSet's, %q, when there is one), found %d", agentSA, len(sas))
	}
	c.EvictdServiceAccount = sas[0]

	tr, err := c.Admin.CoreV1().ServiceAccounts(sas[0].Namespace).CreateToken(ctx, sas[0].Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenTTL)}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("TokenRequest for %s: %w", sas[0], err)
	}
	c.EvictdConfig = c.restConfig(tr.Status.Token)
	if c.EvictdClient, err = kubernetes.NewForConfig(c.EvictdConfig); err != nil {
		return err
	}
	if c.EvictdAPI, err = kube.NewForConfig(c.EvictdConfig); err != nil {
		return err
	}
	c.EvictdKubeconfig = filepath.Join(c.Dir, "evictd.kubeconfig")
	if err := c.WriteKubeconfig(c.EvictdKubeconfig, "evictd", tr.Status.Token); err != nil {
		return err
	}
	c.log.Info("evictd identity ready", zap.Stringer("serviceAccount", sas[0]))
	return nil
}

// daemonSetServiceAccount is the serviceAccountName of the manifest's one
// DaemonSet; "" when it has none.
func daemonSetServiceAccount(objs []*unstructured.Unstructured) (string, error) {
	var names []string
	for _, obj := range objs {
		if obj.GetKind() != "DaemonSet" {
			continue
		}
		name, _, err := unstructured.NestedString(obj.Object, "spec", "template", "spec", "serviceAccountName")
		if err != nil || name == "" {
			return "", fmt.Errorf("DaemonSet %s: no serviceAccountName", obj.GetName())
		}
		names = append(names, name)
	}
	if len(names) > 1 {
		return "", fmt.Errorf("want at most one DaemonSet, found %d", len(names))
	}
	if len(names) == 0 {
		return "", nil
	}
	return names[0], nil
}
