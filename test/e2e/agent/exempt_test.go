// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/pkg/rank"
	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// withTenantRoles runs the controller that fills the built-in edit and
// admin ClusterRoles (they aggregate their rules), for tenantClient.
func withTenantRoles() framework.Option { return framework.WithControllers("clusterrole-aggregation") }

// tenantClient is a namespace user: role (a built-in ClusterRole such as
// edit or admin) bound in ns by a RoleBinding, and nothing else; the
// admin impersonates it. The cluster needs withTenantRoles.
func tenantClient(t *testing.T, c *framework.Cluster, ns, role string) kubernetes.Interface {
	t.Helper()
	user := "tenant-of-" + ns
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + role, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := c.Admin.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.AdminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The role's aggregated rules and the binding reach RBAC's cache in a
	// moment: wait until it allows.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s user of %s cannot list its pods: %v", role, ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTenantCanWriteEveryExemptionClaim records what evictd's eligibility
// checks rest on (docs/decide.md, "What a pod's author cannot grant
// itself"): a namespace user holding the built-in edit or admin role
// creates pods carrying kubernetes.io/config.source=file,
// kubernetes.io/config.mirror, a controller owner reference to a Node, and
// all of them, and the API server keeps them as written. The annotations
// are only validated (config.mirror needs spec.nodeName; the service
// account admission plugin only forbids a mirror service accounts and
// secrets) and NodeRestriction restricts kubelets, not users. What a
// tenant cannot do is read the Node, so its UID, which evictd's mirror
// check demands, is not the tenant's to copy; nor can it add config.mirror
// to a pod afterwards. If the API server starts refusing any of these,
// this test fails: revisit pkg/rank's checks.
func TestTenantCanWriteEveryExemptionClaim(t *testing.T) {
	c := framework.Start(t, withTenantRoles())
	ctx := context.Background()
	node, err := c.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "claims-node"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true)}
	for _, role := range []string{"edit", "admin"} {
		t.Run(role, func(t *testing.T) {
			ns := c.Namespace(t, "tenant-"+role)
			tenant := tenantClient(t, c, ns, role)
			if _, err := tenant.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("the %s user reads the Node (err %v): it could copy the Node's UID into a forged mirror", role, err)
			}
			if _, err := tenant.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("the %s user lists Nodes (err %v)", role, err)
			}
			for _, tc := range []struct {
				name        string
				annotations map[string]string
				owners      []metav1.OwnerReference
			}{
				{name: "source", annotations: map[string]string{rank.ConfigSourceAnnotation: "file"}},
				{name: "mirror", annotations: map[string]string{rank.ConfigMirrorAnnotation: "3f1c"}},
				{name: "owner", owners: []metav1.OwnerReference{owner}},
				{name: "both", annotations: map[string]string{rank.ConfigSourceAnnotation: "file", rank.ConfigMirrorAnnotation: "3f1c"},
					owners: []metav1.OwnerReference{owner}},
			} {
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: "claims-" + tc.name, Namespace: ns, Annotations: tc.annotations, OwnerReferences: tc.owners},
					Spec: corev1.PodSpec{NodeName: node.Name, AutomountServiceAccountToken: ptr.To(false),
						Containers: []corev1.Container{{Name: "main", Image: "evictd.test/workload:latest"}}},
				}
				got, err := tenant.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					t.Errorf("%s: the %s user cannot create it: %v", tc.name, role, err)
					continue
				}
				for k, v := range tc.annotations {
					if got.Annotations[k] != v {
						t.Errorf("%s: annotation %s=%q, written %q", tc.name, k, got.Annotations[k], v)
					}
				}
				if len(got.OwnerReferences) != len(tc.owners) || len(tc.owners) > 0 && got.OwnerReferences[0].UID != node.UID {
					t.Errorf("%s: owners %+v, written %+v", tc.name, got.OwnerReferences, tc.owners)
				}
			}
			// Added afterwards, config.mirror is refused (pod update validation).
			p, err := tenant.CoreV1().Pods(ns).Get(ctx, "claims-owner", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Annotations = map[string]string{rank.ConfigMirrorAnnotation: "3f1c"}
			if _, err := tenant.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
				!strings.Contains(err.Error(), "may not add mirror pod annotation") {
				t.Errorf("adding config.mirror to a pod: %v; want it invalid", err)
			}
		})
	}
}

// TestForgedExemptionsUnderPressure: under real memory pressure, a
// tenant's pods that claim to be static (config.source=file), a mirror
// (config.mirror), or opted out (evictd.io/evict=false, from a namespace
// the configuration does not let opt out) are evicted like any other pod,
// in their usage order, while the opt-out of the namespace optOut names is
// honoured, though its pod is the largest.
//
//	pod                   holds    claim                          evicted
//	allowed/honoured      250 MiB  evict=false, ns in optOut      never
//	tenant/forged-source  120 MiB  config.source=file             1st
//	tenant/forged-mirror  110 MiB  config.mirror                  2nd
//	tenant/forged-optout  100 MiB  evict=false                    3rd
//	allowed/hog           grows to 420 MiB, within its request at e2e-high: last, never needed
//
// No minimum reclaim: each crossing of memory.available<300Mi takes one
// pod, and the hog's growth makes three crossings and no fourth.
func TestForgedExemptionsUnderPressure(t *testing.T) {
	c := framework.Start(t, withTenantRoles())
	createPriorityClasses(t, c)
	node := c.StartNode(t, nodesim.Options{Name: "mem-forged", MemoryBytes: nodeMemory})
	allowed, tenantNS := c.Namespace(t, "allowed"), c.Namespace(t, "tenant")
	tenant := tenantClient(t, c, tenantNS, "edit")

	honoured := podSpec{name: "honoured", holdMiB: 250}.pod(allowed, node.Name)
	honoured.Annotations = map[string]string{rank.OptOutAnnotation: "false"}
	pods := createRunning(t, c.Admin, honoured)
	forged := []*corev1.Pod{
		podSpec{name: "forged-source", holdMiB: 120}.pod(tenantNS, node.Name),
		podSpec{name: "forged-mirror", holdMiB: 110}.pod(tenantNS, node.Name),
		podSpec{name: "forged-optout", holdMiB: 100}.pod(tenantNS, node.Name),
	}
	forged[0].Annotations = map[string]string{rank.ConfigSourceAnnotation: "file"}
	forged[1].Annotations = map[string]string{rank.ConfigMirrorAnnotation: "3f1c"}
	forged[2].Annotations = map[string]string{rank.OptOutAnnotation: "false"}
	for _, p := range forged {
		p.Spec.AutomountServiceAccountToken = ptr.To(false) // a mirror may not reference a service account
	}
	for name, p := range createRunning(t, tenant, forged...) {
		pods[name] = p
	}
	waitHolding(t, node, mapValues(pods)...)

	cfg := filepath.Join(t.TempDir(), "evictd.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: evictd.io/v1alpha1\nkind: EvictdConfiguration\noptOut:\n  namespaces: ["+allowed+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEvictd(t, c, node, memoryFlags[0], "--config="+cfg)
	hog := createRunning(t, c.Admin, podSpec{name: "hog", priorityClass: classHigh, holdMiB: 64, growMiBPerSec: 30, growToMiB: 420,
		requests: res("memory", "512Mi")}.pod(allowed, node.Name))["hog"]
	waitHolding(t, node, hog)

	want := []string{podKey(pods["forged-source"]), podKey(pods["forged-mirror"]), podKey(pods["forged-optout"])}
	evs := waitEvictions(t, e, len(want), evictionTimeout)
	e.waitLog(30*time.Second, "pressure episode ended", func(l logEntry) bool { return l.TS.After(evs[len(evs)-1].TS) })
	if got := podsOf(evicted(e)); !slices.Equal(got, want) {
		t.Fatalf("evictd evicted %v, want exactly %v in that order", got, want)
	}
	for _, p := range forged {
		waitGone(t, c.Admin, p, 30*time.Second)
	}
	untouched(t, c.Admin, node, pods["honoured"])
	untouched(t, c.Admin, node, hog)
}
