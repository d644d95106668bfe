// SPDX-License-Identifier: Apache-2.0

// Command cluster runs the test control plane (etcd, kube-apiserver,
// kube-controller-manager; see package framework) until SIGINT or SIGTERM,
// for the demo and for poking at by hand:
//
//	cluster [--bin-dir DIR] [--dir DIR] [--env-file FILE]
//
// Once the cluster is ready it prints, and writes to --env-file, shell
// assignments a script can source:
//
//	KUBECONFIG=.../admin.kubeconfig          admin (system:masters)
//	EVICTD_KUBECONFIG=.../evictd.kubeconfig  evictd's ServiceAccount only
//	CLUSTER_DIR=...                          logs, PKI, etcd data
//
// On a signal it stops every process and removes the directory it made.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/internal/cmdutil"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg framework.Config
	var envFile string
	fs.StringVar(&cfg.BinDir, "bin-dir", "", "directory of the control plane binaries (default: the repository's _output/bin)")
	fs.StringVar(&cfg.Dir, "dir", "", "working directory, kept after exit (default: a temporary one, removed)")
	fs.StringVar(&envFile, "env-file", "", "also write the KUBECONFIG=... lines to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cluster: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	logger, err := cmdutil.Logger()
	if err != nil {
		fmt.Fprintf(stderr, "cluster: %v\n", err)
		return 1
	}
	defer logger.Sync() //nolint:errcheck // best effort at exit
	cfg.Logger = logger

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := framework.StartCluster(ctx, cfg)
	if err != nil {
		logger.Error("cluster did not start", zap.Error(err))
		return 1
	}
	defer c.Stop()

	env := fmt.Sprintf("KUBECONFIG=%s\nEVICTD_KUBECONFIG=%s\nCLUSTER_DIR=%s\n", c.AdminKubeconfig, c.EvictdKubeconfig, c.Dir)
	if err := cmdutil.PublishEnv(stdout, env, envFile, 0o600); err != nil {
		logger.Error("cannot write env file", zap.String("path", envFile), zap.Error(err))
		return 1
	}
	<-ctx.Done()
	logger.Info("stopping the test cluster")
	return 0
}
