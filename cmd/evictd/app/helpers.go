// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/pkg/agent"
	"github.com/evictd/evictd/pkg/agent/fastpath"
	"github.com/evictd/evictd/pkg/evict"
	"github.com/evictd/evictd/pkg/hostpaths"
	"github.com/evictd/evictd/pkg/options"
	"github.com/evictd/evictd/pkg/thresholds"
)

// armingOrNil keeps a nil *fastpath.Manager from becoming a non-nil
// interface.
func armingOrNil(m *fastpath.Manager) agent.Arming {
	if m == nil {
		return nil
	}
	return m
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: %w", options.FlagKubeconfig, kubeconfig, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --%s given and not running in a cluster: %w", options.FlagKubeconfig, err)
	}
	return c, nil
}

func hasStallThreshold(ths []thresholds.Threshold) bool {
	for _, th := range ths {
		if th.Signal.Stall() {
			return true
		}
	}
	return false
}

// answerNoter passes every eviction and deletion's result to note.
type answerNoter struct {
	evict.PodAPI
	note func(error)
}

func (a answerNoter) Evict(ctx context.Context, ev *policyv1.Eviction) error {
	err := a.PodAPI.Evict(ctx, ev)
	a.note(err)
	return err
}

func (a answerNoter) DeletePod(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	err := a.PodAPI.DeletePod(ctx, namespace, name, opts)
	a.note(err)
	return err
}

// warnHostPaths logs, once at start, each host directory evictd can run
// without but found missing or empty: a DaemonSet mounts them unchecked, so
// a wrong path is otherwise an empty directory read without error
// (package hostpaths).
func warnHostPaths(log *zap.Logger, hostRoot, imageFs, containerFs string) {
	for _, p := range hostpaths.Check(hostRoot, imageFs, containerFs) {
		state := "empty"
		if p.Missing {
			state = "missing"
		}
		log.Warn("host directory missing or empty: check the host paths evictd is given", zap.String("path", p.Path),
			zap.String("state", state), zap.String("unmeasured", p.Loses), zap.String("fix", p.Hint))
	}
}
