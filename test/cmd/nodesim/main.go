// SPDX-License-Identifier: Apache-2.0

// Command nodesim runs one simulated node (see package nodesim) against a
// cluster until SIGINT or SIGTERM, for the demo and for manual runs. It needs
// root and the memory and pids controllers, on cgroup v1 or v2.
//
//	nodesim --kubeconfig FILE --name NODE --memory 1Gi [--reserved 64Mi]
//	        [--disk 512Mi] [--max-pids N] [--workload-bin PATH] [--env-file FILE]
//
// Once the node is registered it prints, and writes to --env-file, shell
// assignments for starting evictd against it:
//
//	NODE_NAME=...
//	HOST_ROOT=...      evictd --host-root
//	CGROUP_ROOT=...    evictd --cgroup-root
//	NODE_CGROUP=...    evictd --node-cgroup (the same cgroup: its memory is the node's)
//
// On a signal it stops the pods' processes and removes the node's cgroups,
// mounts and directories.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/test/internal/cmdutil"
	"github.com/evictd/evictd/test/nodesim"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nodesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of an identity that may register Nodes and drive pods")
	name := fs.String("name", "", "Node name (required)")
	memory := fs.String("memory", "1Gi", "node memory: the node cgroup limit and memory capacity")
	reserved := fs.String("reserved", "0", "memory kept out of allocatable")
	disk := fs.String("disk", "0", "size of a tmpfs for the node's /var (0: none)")
	maxPIDs := fs.Int64("max-pids", 0, "pids.max of the node cgroup (0: no limit)")
	workload := fs.String("workload-bin", "", "workload binary (default: workload next to this binary)")
	envFile := fs.String("env-file", "", "also write the NODE_NAME=... lines to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts, err := options(*name, *memory, *reserved, *disk, *workload, fs.NArg())
	if err != nil {
		fmt.Fprintf(stderr, "nodesim: %v\n", err)
		return 2
	}
	opts.MaxPIDs = *maxPIDs
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "nodesim: --kubeconfig %q: %v\n", *kubeconfig, err)
		return 2
	}
	if opts.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintf(stderr, "nodesim: %v\n", err)
		return 2
	}
	logger, err := cmdutil.Logger()
	if err != nil {
		fmt.Fprintf(stderr, "nodesim: %v\n", err)
		return 1
	}
	defer logger.Sync() //nolint:errcheck // best effort at exit
	opts.Logger = logger

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	node, err := nodesim.Start(ctx, opts)
	if err != nil {
		logger.Error("node did not start", zap.Error(err))
		return 1
	}
	env := fmt.Sprintf("NODE_NAME=%s\nHOST_ROOT=%s\nCGROUP_ROOT=%s\nNODE_CGROUP=%s\n", node.Name, node.HostRoot, node.CgroupRoot, node.CgroupRoot)
	code := 0
	if err := cmdutil.PublishEnv(stdout, env, *envFile, 0o644); err != nil {
		logger.Error("cannot write env file", zap.String("path", *envFile), zap.Error(err))
		stop()
		code = 1
	}
	<-ctx.Done()
	if err := node.Stop(); err != nil {
		logger.Error("cleanup incomplete", zap.Error(err))
		return 1
	}
	return code
}

// options turns the flag values into nodesim.Options, naming any bad one.
func options(name, memory, reserved, disk, workload string, extraArgs int) (nodesim.Options, error) {
	var o nodesim.Options
	if extraArgs > 0 {
		return o, fmt.Errorf("unexpected arguments")
	}
	if name == "" {
		return o, fmt.Errorf("--name is required")
	}
	o.Name = name
	for _, q := range []struct {
		flag string
		val  string
		dst  *int64
	}{{"--memory", memory, &o.MemoryBytes}, {"--reserved", reserved, &o.ReservedMemoryBytes}, {"--disk", disk, &o.DiskBytes}} {
		v, err := resource.ParseQuantity(q.val)
		if err != nil {
			return o, fmt.Errorf("%s=%q: %v", q.flag, q.val, err)
		}
		*q.dst = v.Value()
	}
	if workload == "" {
		self, err := os.Executable()
		if err != nil {
			return o, err
		}
		workload = filepath.Join(filepath.Dir(self), "workload")
	}
	o.WorkloadBin = workload
	return o, nil
}
