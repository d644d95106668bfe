// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// isPodDeletes reports whether o is the pod deletes' admission policy
// (evictd-pod-deletes, in the chart named after the release) or its
// binding.
func isPodDeletes(o *unstructured.Unstructured) bool {
	return strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && strings.HasSuffix(o.GetName(), "-pod-deletes")
}

// TestChartPodDeletesPolicy: the policy that bounds evictd's pod deletes
// to its own node is rendered, with its binding, whatever the values say:
// with pdbPolicy best-effort (the only value that grants "delete pods"),
// with the other policies off, and with rbac.create false (where you grant
// the delete yourself). The default render's copy is
// deploy/daemonset.yaml's, field for field (TestChartDefaultsEqualManifest).
func TestChartPodDeletesPolicy(t *testing.T) {
	for _, values := range []string{
		"",
		"pdbPolicy: best-effort",
		"pdbPolicy: best-effort\nnodeBrake: {admissionPolicy: false}\nnodeLease: {admissionPolicy: false}",
		"pdbPolicy: best-effort\nrbac: {create: false}",
	} {
		objs := mustRender(t, values)
		const name = defaultRelease + "-" + defaultNamespace + "-pod-deletes"
		find(t, objs, "ValidatingAdmissionPolicy", name)
		if p := nested[string](t, find(t, objs, "ValidatingAdmissionPolicyBinding", name), "spec", "policyName"); p != name {
			t.Errorf("values %q: the binding's policyName is %q; want %q", values, p, name)
		}
	}
}
