// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/evictd/evictd/test/e2e/framework"
)

// TestChartServerSideDryRun creates every object the chart renders, with
// default and with non-default values, on the real test API server with
// DryRun=All and strict field validation: the server decodes, defaults,
// validates and admits each exactly as for a real create, and stores
// nothing. The ServiceMonitor and PrometheusRule are left out: the test
// server has no Prometheus Operator CRDs (their shape is checked in
// TestChartValues), and so is the openshift preset's
// SecurityContextConstraints (TestChartOpenShiftSCC).
//
// The cluster itself applies deploy/daemonset.yaml's Namespace,
// ServiceAccount and RBAC objects when it starts (they are evictd's test
// identity); for those a dry-run create can only answer AlreadyExists, so
// they are sent as a dry-run update of the live object instead, which the
// server validates the same way.
func TestChartServerSideDryRun(t *testing.T) {
	c := framework.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// fullValues puts everything in namespace evictd-chart; dry-run
	// objects in it need it to exist (the chart's Namespace, created in the
	// same dry run, is not stored).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "evictd-chart"}}
	if _, err := c.Admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cases := []struct{ name, release, ns, values string }{
		{"defaults", defaultRelease, defaultNamespace, ""},
		{"full", "agents", "evictd-chart", fullValues},
		// The writable pod-cgroups mount nested in the read-only one.
		{"actuator", defaultRelease, defaultNamespace, "actuator: {enabled: true}"},
	}
	// Each distribution's preset (TestChartPresets checks their paths).
	for _, p := range presets(t) {
		cases = append(cases, struct{ name, release, ns, values string }{"preset " + p.name, defaultRelease, defaultNamespace, p.values})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderRelease(t, tc.release, tc.ns, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			sent := 0
			for _, obj := range objs {
				if obj.GroupVersionKind().Group == "monitoring.coreos.com" {
					t.Logf("%s: not sent (no Prometheus Operator CRDs on the test server)", key(obj))
					continue
				}
				if obj.GroupVersionKind().Group == "security.openshift.io" {
					t.Logf("%s: not sent (no OpenShift API on the test server; TestChartOpenShiftSCC checks it)", key(obj))
					continue
				}
				how, err := dryRunCreate(ctx, c, obj)
				if err != nil {
					t.Errorf("%s: the API server refused it: %v", key(obj), err)
					continue
				}
				sent++
				t.Logf("%s: accepted (%s)", key(obj), how)
			}
			// ServiceAccount, ClusterRole, ClusterRoleBinding, DaemonSet at least.
			if sent < 4 {
				t.Errorf("only %d objects sent", sent)
			}
		})
	}

	// The dry run can refuse: a field the API does not know (strict field
	// validation) and an invalid value each fail.
	for what, spoil := range map[string]func(*unstructured.Unstructured){
		"unknown field": func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "x", "spec", "template", "spec", "nodeSelecter")
		},
		"invalid value": func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "Sometimes", "spec", "updateStrategy", "type")
		},
	} {
		ds := find(t, mustRender(t, ""), "DaemonSet", "evictd")
		spoil(ds)
		if _, err := dryRunCreate(ctx, c, ds); err == nil {
			t.Errorf("a DaemonSet with an %s was accepted", what)
		}
	}

	// A dry run stores nothing.
	for n, name := range map[string]string{"evictd-system": "evictd", "evictd-chart": "agents-evictd"} {
		if _, err := c.Admin.AppsV1().DaemonSets(n).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("DaemonSet %s/%s after the dry run: %v; want NotFound", n, name, err)
		}
	}
	if _, err := c.Admin.CoreV1().ConfigMaps("evictd-chart").Get(ctx, "agents-evictd-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap evictd-chart/agents-evictd-config after the dry run: %v; want NotFound", err)
	}
}

// dryRunCreate sends obj as a dry-run create, or as a dry-run update when it
// exists already, and says which.
func dryRunCreate(ctx context.Context, c *framework.Cluster, obj *unstructured.Unstructured) (string, error) {
	res, err := c.ResourceFor(obj)
	if err != nil {
		return "", err
	}
	_, err = res.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	if !apierrors.IsAlreadyExists(err) {
		return "dry-run create", err
	}
	live, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	upd := obj.DeepCopy()
	upd.SetResourceVersion(live.GetResourceVersion())
	_, err = res.Update(ctx, upd, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	return "dry-run update of the live object", err
}
