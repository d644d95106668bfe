// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/test/internal/prereq"
	"github.com/evictd/evictd/test/nodesim"
)

// InCI reports whether the tests run in CI (CI=true), where a missing
// prerequisite is a failure instead of a reason to skip.
func InCI() bool { return prereq.InCI() }

// Require stops the test when err (a missing prerequisite) is not nil: it
// fails in CI and skips elsewhere, naming the reason either way.
func Require(t testing.TB, err error) {
	t.Helper()
	prereq.Require(t, err)
}

// RequireRoot requires uid 0: the simulated nodes create cgroups and mounts.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Require(t, fmt.Errorf("needs root for cgroups and mounts (euid %d)", os.Geteuid()))
	}
}

// RequireBinary returns the path of a built binary (see Binary), or stops
// the test as Require does.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := Binary(name)
	Require(t, err)
	return p
}

// Option changes the Config Start uses.
type Option func(*Config)

// WithReadyTimeout bounds the cluster start.
func WithReadyTimeout(d time.Duration) Option { return func(c *Config) { c.ReadyTimeout = d } }

// WithScheduler runs kube-scheduler and the replicaset and deployment
// controllers, for tests whose Deployments the scheduler places on
// simulated nodes (Config.Scheduler).
func WithScheduler() Option { return func(c *Config) { c.Scheduler = true } }

// WithAPIServerArgs adds arguments to kube-apiserver's (Config.APIServerArgs).
func WithAPIServerArgs(args ...string) Option {
	return func(c *Config) { c.APIServerArgs = append(c.APIServerArgs, args...) }
}

// WithPriorityAndFairness turns API Priority and Fairness on
// (Config.PriorityAndFairness).
func WithPriorityAndFairness() Option { return func(c *Config) { c.PriorityAndFairness = true } }

// WithControllers runs these controllers of the controller manager too.
func WithControllers(names ...string) Option {
	return func(c *Config) { c.Controllers = append(c.Controllers, names...) }
}

// Start starts a cluster for a test (see StartCluster) and stops it in
// t.Cleanup, printing the tail of every component log first when the test
// has failed. Missing binaries skip the test, or fail it in CI.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	for _, name := range controlPlaneBinaries {
		RequireBinary(t, name)
	}
	cfg := Config{Logger: zaptest.NewLogger(t)}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Scheduler || cfg.RealNodes {
		RequireBinary(t, "kube-scheduler")
	}
	ctx := context.Background()
	if deadline, ok := testDeadline(t); ok {
		// Give up in time to clean up before a test timeout strikes.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-clusterGuard))
		defer cancel()
	}
	c, err := StartCluster(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopGuard := beforeDeadline(t, clusterGuard, func() {
		t.Errorf("test is about to time out: stopping the test cluster now; control plane logs:\n%s", c.LogTails(40))
		c.Stop()
	})
	t.Cleanup(func() {
		stopGuard()
		if t.Failed() {
			// A few lines: the control plane is rarely why a test failed,
			// and a long tail would bury the test's own messages.
			t.Log("test failed; control plane logs:\n" + c.LogTails(8))
		}
		c.Stop()
	})
	t.Logf("test cluster at %s started in %s", c.Server, c.StartDuration.Round(time.Millisecond))
	return c
}

// Namespace creates a namespace for the test (see CreateNamespace) and
// deletes it in t.Cleanup.
func (c *Cluster) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns, err := c.CreateNamespace(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return ns
}

// StartNode starts a simulated node (see package nodesim) on this cluster
// and stops it in t.Cleanup. Client defaults to the admin client, Logger to
// the test log and WorkloadBin to the built workload binary. A host without
// root or the memory and pids controllers (cgroup v1 or v2) skips the test,
// or fails it in CI. Tests that read the node's memory files take their
// names for the host's version from internal/cgrouptest (LimitFile,
// UsageFile, V2).
func (c *Cluster) StartNode(t testing.TB, opts nodesim.Options) *nodesim.Node {
	t.Helper()
	RequireRoot(t)
	Require(t, nodesim.Supported(opts.CgroupFS))
	if opts.WorkloadBin == "" {
		opts.WorkloadBin = RequireBinary(t, "workload")
	}
	if opts.Client == nil {
		opts.Client = c.Admin
	}
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	n, err := nodesim.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	stopGuard := beforeDeadline(t, nodeGuard, func() {
		t.Errorf("test is about to time out: stopping simulated node %s now", n.Name)
		_ = n.Stop()
	})
	t.Cleanup(func() {
		stopGuard()
		if err := n.Stop(); err != nil {
			t.Errorf("stop simulated node %s: %v", n.Name, err)
		}
	})
	return n
}

// How long before `go test -timeout` strikes the guards tear down: a timeout
// panic runs no cleanups, so this is the last chance to unmount and remove
// cgroups (the processes would die with the test binary anyway). Nodes go
// first, while the API server still answers.
const (
	nodeGuard    = 4 * time.Second
	clusterGuard = 3 * time.Second
)

// beforeDeadline runs f that long before the test binary's deadline, if it
// has one, and returns a function that cancels it.
func beforeDeadline(t testing.TB, margin time.Duration, f func()) (cancel func()) {
	deadline, ok := testDeadline(t)
	if !ok {
		return func() {}
	}
	timer := time.AfterFunc(max(time.Until(deadline)-margin, 0), f)
	return func() { timer.Stop() }
}

// testDeadline is the -timeout deadline of the test binary, when t is a
// *testing.T that has one.
func testDeadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}
