package podwatch

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// The informers themselves run against a real API server in pkg/agent's
// API tests; these cover the pure helpers.

func TestPodOf(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	tests := []struct {
		name string
		obj  any
		want *v1.Pod
	}{
		{"a pod", p, p},
		{"a tombstone of a pod (missed delete)", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: p}, p},
		{"a tombstone of something else", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &v1.Node{}}, nil},
		{"something else", &v1.Node{}, nil},
	}
	for _, tc := range tests {
		if got := podOf(tc.obj); got != tc.want {
			t.Errorf("%s: podOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTrimDropsManagedFields(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := trim(p)
	if err != nil || out.(*v1.Pod).ManagedFields != nil || out.(*v1.Pod).Name != "a" {
		t.Errorf("trim = %+v, %v", out, err)
	}
}

func TestNewRequiresClientAndNode(t *testing.T) {
	if _, err := New(Options{NodeName: "n"}); err == nil {
		t.Error("New without a client: no error")
	}
}
