// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/evictd/evictd/pkg/cleanup"
	"github.com/evictd/evictd/pkg/cliflag"
	"github.com/evictd/evictd/pkg/evictreq"
	"github.com/evictd/evictd/pkg/install"
	"github.com/evictd/evictd/pkg/kube"
	"github.com/evictd/evictd/pkg/logging"
)

// cleanupSynopsis names every flag of cleanup but --help.
const cleanupSynopsis = "evictd cleanup [--delete-daemonset NAMESPACE/NAME] [--install NAMESPACE/NAME] [--kubeconfig FILE] [--node-lease-namespace NS] " +
	"[--timeout DURATION] [--log-format FORMAT] [--log-level LEVEL]"

const cleanupUsage = `Usage: ` + cleanupSynopsis + `

Takes back everything one install of evictd wrote to the cluster, for its
uninstall: on every Node, its taints (evictd.io/memory-pressure,
disk-pressure, pid-pressure) and conditions (EvictdMemoryPressure,
EvictdDiskPressure, EvictdPIDPressure); its agents' node leases
(evictd-<node>; never a kubelet's); the EvictionRequests its agents made,
where the API server serves them. The install is its DaemonSet: the one
--delete-daemonset names, unless --install names it. Everything evictd
writes names its install; another install's is left alone, and what an
evictd older than these marks wrote (naming no install) is taken back.
With --delete-daemonset it first deletes the install's DaemonSet and waits
until its pods are gone, so that no agent puts a brake back afterwards.
A call the API server cannot serve is made again after a back-off until
--timeout. It logs what it removed, reads the cluster again, and exits 1
naming what is left, if anything is.

Flags:
`

type cleanupFlags struct {
	daemonSet, install, kubeconfig, leaseNamespace string
	timeout                                        time.Duration
	logFormat, logLevel                            string
	help                                           bool
}

func newCleanupFlags() (*cleanupFlags, *pflag.FlagSet) {
	f := &cleanupFlags{}
	fs := cliflag.NewFlagSet("cleanup")
	fs.StringVar(&f.daemonSet, "delete-daemonset", "", "Delete this DaemonSet (NAMESPACE/NAME) first and wait until its pods are gone.")
	fs.StringVar(&f.install, "install", "", "The install to take back, its DaemonSet (NAMESPACE/NAME, the agents' --install); default: --delete-daemonset's. One of the two is required.")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, else the pod's ServiceAccount).")
	fs.StringVar(&f.leaseNamespace, "node-lease-namespace", "", "Namespace of the agents' node leases (their --node-lease-namespace); default: the install's namespace, where its agents keep them unless told otherwise.")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "How long the whole cleanup may take, the wait for the DaemonSet's pods and the retries of calls the API server could not serve included.")
	logging.AddFlags(fs, &f.logFormat, &f.logLevel)
	fs.BoolVarP(&f.help, flagHelp, "h", false, "Print this help and exit.")
	return f, fs
}

func cleanupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, fs := newCleanupFlags()
	if err := fs.Parse(args); err != nil {
		return flagError(stderr, "cleanup", err)
	}
	if f.help {
		fmt.Fprint(stdout, cleanupUsage)
		fmt.Fprint(stdout, fs.FlagUsagesWrapped(helpColumns))
		return exitOK
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "evictd cleanup: %v\n", err)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	case f.timeout <= 0:
		return fail(fmt.Errorf("invalid --timeout %v: want a positive duration", f.timeout))
	case fs.Changed("node-lease-namespace") && f.leaseNamespace == "":
		return fail(fmt.Errorf("invalid --node-lease-namespace \"\": want a namespace"))
	}
	if f.daemonSet != "" {
		if _, _, err := cleanup.ParseDaemonSet(f.daemonSet); err != nil {
			return fail(fmt.Errorf("invalid --delete-daemonset: %w", err))
		}
	}
	// The install whose state is taken back: never a guess, for another
	// install's brakes, leases and requests must stay.
	id := f.install
	flag := "--install"
	if id == "" {
		id, flag = f.daemonSet, "--delete-daemonset"
	}
	if id == "" {
		return fail(fmt.Errorf("no install to take back: give --delete-daemonset NAMESPACE/NAME or --install NAMESPACE/NAME (the install's DaemonSet)"))
	}
	if _, err := install.Parse(id); err != nil {
		return fail(fmt.Errorf("invalid %s: %w", flag, err))
	}
	if f.leaseNamespace == "" {
		// An agent's default is its pod's namespace, its DaemonSet's: the
		// install's, wherever the cleanup runs (its Job, a workstation).
		f.leaseNamespace, _, _ = strings.Cut(id, "/")
	}
	log, err := logging.NewTo(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = log.Sync() }()
	restore := logging.RouteKlog(log)
	defer restore()

	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: f.kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "evictd cleanup: kubeconfig: %v\n", err)
		return exitFailure
	}
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "evictd cleanup: %v\n", err)
		return exitFailure
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	res, err := cleanup.Run(ctx, cleanup.Options{
		API: client, Install: id, LeaseNamespace: f.leaseNamespace, Requester: evictreq.DefaultRequester, DaemonSet: f.daemonSet, Log: log,
	})
	fmt.Fprintf(stdout, "removed %d taints, %d conditions, %d node leases, %d EvictionRequests%s\n",
		res.TaintsRemoved, res.ConditionsRemoved, res.LeasesDeleted, res.EvictionRequestsDeleted, servedNote(res.EvictionRequestsServed))
	if err != nil {
		fmt.Fprintf(stderr, "evictd cleanup: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "nothing of install %s's is left on the cluster\n", id)
	return exitOK
}

func servedNote(served bool) string {
	if served {
		return ""
	}
	return " (the API server serves no EvictionRequests)"
}
