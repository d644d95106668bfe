// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/evictd/evictd/test/e2e/framework"
)

// The API server's admission (the ServiceAccount plugin) gives a pod that
// mounts its token automatically a projected token of 3607 s, which an API
// server with the default --service-account-extend-token-expiration=true
// extends to a year (k8s.io/kubernetes pkg/serviceaccount
// WarnOnlyBoundTokenExpirationSeconds; the e2e test TestTokenExpiration
// shows it on a real API server). evictd's pods mount their own, of
// tokenSeconds.
const (
	tokenSeconds   = 3600
	tokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// TestShippedTokenLastsAnHour: every pod evictd ships (the agents'
// DaemonSet and the cleanup Job, in deploy/ and in the chart, its hook
// included) turns the automounted token off and mounts, read-only at the
// standard path, a projected volume of what the automounted one holds: a
// ServiceAccount token of expirationSeconds 3600 (the API server's default
// audience, so bound to the pod), the cluster's CA from kube-root-ca.crt
// and the pod's namespace.
func TestShippedTokenLastsAnHour(t *testing.T) {
	manifest, err := framework.ReadManifest(repoPath(t, "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job, err := framework.ReadManifest(repoPath(t, "deploy", "cleanup", "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := dryRunInstall(t, defaultRelease, defaultNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Hooks) != 1 {
		t.Fatalf("the chart has %d hooks; want 1, the cleanup Job", len(rel.Hooks))
	}
	hook, err := framework.ParseManifest(strings.NewReader(rel.Hooks[0].Manifest))
	if err != nil || len(hook) != 1 {
		t.Fatalf("the chart's hook: %v, %d objects", err, len(hook))
	}
	chart := mustRender(t, "")
	for _, src := range []struct {
		what string
		obj  map[string]any
	}{
		{"deploy/daemonset.yaml DaemonSet evictd", find(t, manifest, "DaemonSet", "evictd").Object},
		{"deploy/cleanup/job.yaml Job evictd-cleanup", find(t, job, "Job", "evictd-cleanup").Object},
		{"the chart's DaemonSet", find(t, chart, "DaemonSet", "evictd").Object},
		{"the chart's cleanup hook", hook[0].Object},
	} {
		t.Run(src.what, func(t *testing.T) {
			spec, ok, _ := nestedMap(src.obj, "spec", "template", "spec")
			if !ok {
				t.Fatal("no spec.template.spec")
			}
			var pod corev1.PodSpec
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &pod); err != nil {
				t.Fatal(err)
			}
			if err := checkToken(&pod); err != nil {
				t.Error(err)
			}
		})
	}
}

func nestedMap(o map[string]any, path ...string) (map[string]any, bool, error) {
	cur := o
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = next
	}
	return cur, true, nil
}

// checkToken says what in pod keeps its API token from being the
// one-hour projected one.
func checkToken(pod *corev1.PodSpec) error {
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		return fmt.Errorf("automountServiceAccountToken is %v; want false, else the API server's admission mounts a token of 3607 s, valid a year", pod.AutomountServiceAccountToken)
	}
	if len(pod.Containers) != 1 {
		return fmt.Errorf("%d containers; want 1", len(pod.Containers))
	}
	var volume string
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.MountPath == tokenMountPath {
			if !m.ReadOnly {
				return fmt.Errorf("the mount at %s is writable", tokenMountPath)
			}
			volume = m.Name
		}
	}
	if volume == "" {
		return fmt.Errorf("nothing mounted at %s, where client libraries read the token", tokenMountPath)
	}
	var sources []corev1.VolumeProjection
	for _, v := range pod.Volumes {
		if v.Name == volume && v.Projected != nil {
			sources = v.Projected.Sources
		}
	}
	var token, ca, ns bool
	for _, s := range sources {
		switch {
		case s.ServiceAccountToken != nil:
			tok := s.ServiceAccountToken
			if tok.Path != "token" || tok.Audience != "" || tok.ExpirationSeconds == nil || *tok.ExpirationSeconds != tokenSeconds {
				return fmt.Errorf("volume %s: serviceAccountToken path %q, audience %q, expirationSeconds %v; want token, the API server's, %d",
					volume, tok.Path, tok.Audience, deref(tok.ExpirationSeconds), tokenSeconds)
			}
			token = true
		case s.ConfigMap != nil:
			ca = s.ConfigMap.Name == "kube-root-ca.crt" && len(s.ConfigMap.Items) == 1 &&
				s.ConfigMap.Items[0].Key == "ca.crt" && s.ConfigMap.Items[0].Path == "ca.crt"
		case s.DownwardAPI != nil:
			ns = len(s.DownwardAPI.Items) == 1 && s.DownwardAPI.Items[0].Path == "namespace" &&
				s.DownwardAPI.Items[0].FieldRef != nil && s.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.namespace"
		}
	}
	if !token || !ca || !ns {
		return fmt.Errorf("volume %s (projected: %v) has token %v, ca.crt from kube-root-ca.crt %v, namespace %v; want all three", volume, sources != nil, token, ca, ns)
	}
	return nil
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
