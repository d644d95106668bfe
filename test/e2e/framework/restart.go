// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
)

// apiserverName is the component name StartCluster gives kube-apiserver.
const apiserverName = "kube-apiserver"

// outageStopGrace is how long StopAPIServer waits after SIGTERM before it
// sends SIGKILL.
const outageStopGrace = 2 * time.Second

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after a grace
// period), as an outage of the control plane looks to the nodes: new
// connections are refused and watches break. etcd, the controller manager
// and the cluster's files stay, so StartAPIServer brings the same cluster
// back. It returns the command line to pass to StartAPIServer.
func (c *Cluster) StopAPIServer() (argv []string, err error) {
	comp, _, err := c.component(apiserverName)
	if err != nil {
		return nil, err
	}
	if comp.p.Exited() {
		return nil, fmt.Errorf("%s is not running", apiserverName)
	}
	// The command line is read back from the kernel, so that the restart
	// uses exactly the flags StartCluster chose (ports, certificates,
	// keys) without keeping a second copy of them.
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", comp.p.Pid()))
	if err != nil {
		return nil, fmt.Errorf("read %s's command line: %w", apiserverName, err)
	}
	argv = strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%s's command line is empty", apiserverName)
	}
	// A shorter grace than the cluster's teardown: kube-apiserver drains
	// for several seconds on SIGTERM, and an outage should begin promptly.
	comp.p.Stop(outageStopGrace)
	comp.log.Close()
	c.log.Info("kube-apiserver stopped")
	return argv, nil
}

// StartAPIServer starts kube-apiserver again with argv (from StopAPIServer)
// and waits until /readyz answers ok or ctx ends. Its log goes on in the
// same file.
func (c *Cluster) StartAPIServer(ctx context.Context, argv []string) error {
	old, i, err := c.component(apiserverName)
	if err != nil {
		return err
	}
	if !old.p.Exited() {
		return fmt.Errorf("%s is still running", apiserverName)
	}
	if len(argv) == 0 {
		return fmt.Errorf("no command line to start %s with", apiserverName)
	}
	comp, err := startComponent(c.Dir, apiserverName, argv[0], argv[1:])
	if err != nil {
		return err
	}
	c.components[i] = comp
	start := time.Now()
	if err := c.waitFor(ctx, "restarted kube-apiserver /readyz", c.apiserverReady); err != nil {
		return err
	}
	c.log.Info("kube-apiserver restarted", zap.Duration("after", time.Since(start)))
	return nil
}

func (c *Cluster) component(name string) (*component, int, error) {
	for i, comp := range c.components {
		if comp.name == name {
			return comp, i, nil
		}
	}
	return nil, 0, fmt.Errorf("the cluster has no %s", name)
}

// PID is the process id of the control-plane component name ("etcd",
// "kube-apiserver", ...), for a benchmark that reads its CPU time and memory
// from /proc. After StartAPIServer it is the new API server's.
func (c *Cluster) PID(name string) (int, error) {
	comp, _, err := c.component(name)
	if err != nil {
		return 0, err
	}
	if comp.p.Exited() {
		return 0, fmt.Errorf("%s is not running", name)
	}
	return comp.p.Pid(), nil
}
