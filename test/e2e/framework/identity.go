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
}

// IsIdentityObject reports whether StartCluster applied obj (a Namespace,
// ServiceAccount or RBAC object of the manifest).
func IsIdentityObject(obj *unstructured.Unstructured) bool {
	return identityKinds[obj.GroupVersionKind().GroupKind()]
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
	var sas []types.NamespacedName
	for _, obj := range objs {
		if !IsIdentityObject(obj) {
			continue
		}
		ri, err := c.ResourceFor(obj)
		if err != nil {
			return err
		}
		// Server-side apply: the same call works on a fresh cluster and on
		// one a previous start left objects in.
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "evictd-e2e", Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetKind() == "ServiceAccount" {
			sas = append(sas, types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
	}
	if len(sas) != 1 {
		return fmt.Errorf("want exactly one ServiceAccount, found %d", len(sas))
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
	if err := c.writeKubeconfig(c.EvictdKubeconfig, "evictd", tr.Status.Token); err != nil {
		return err
	}
	c.log.Info("evictd identity ready", zap.Stringer("serviceAccount", sas[0]))
	return nil
}
