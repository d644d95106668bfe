// SPDX-License-Identifier: Apache-2.0

// Package framework starts a real Kubernetes control plane for evictd's
// end-to-end tests and the demo: etcd, kube-apiserver and
// kube-controller-manager, built from Go modules by `make cluster-bins`
// (hack/build-cluster.sh) into _output/bin. There is no kubelet and no
// scheduler; simulated nodes (package nodesim) play the kubelet, and tests
// bind pods with spec.nodeName.
//
// # In a test
//
//	c := framework.Start(t)                      // ~5 s; stopped in t.Cleanup
//	node := c.StartNode(t, nodesim.Options{Name: "node-a", MemoryBytes: 1 << 30})
//	ns := c.Namespace(t, "mytest")               // with its default ServiceAccount
//	c.Admin.CoreV1().Pods(ns).Create(...)        // system:masters
//	c.EvictdClient                               // evictd's ServiceAccount only
//	// evictd as a real process, with only that identity:
//	//   evictd run --kubeconfig=<c.EvictdKubeconfig> --node-name=<node.Name>
//	//     --host-root=<node.HostRoot> --cgroup-root=<node.CgroupRoot>
//	//     --node-cgroup=<node.CgroupRoot>
//
// Binaries are found in <repo>/_output/bin (the repository root is the
// nearest directory above the working directory whose go.mod is this
// module; RepoRootEnv and BinDirEnv override both, and KubeBinDirEnv the
// directory of the Kubernetes binaries alone). When one is missing,
// Start and StartNode skip the test naming "run make build cluster-bins",
// or fail it when CI=true; so do StartNode and RequireRoot without root or
// the memory and pids controllers (cgroup v1 or v2).
//
// # What Start sets up
//
//   - A temporary directory named after the test process, holding a test CA
//     and serving certificate (clients verify TLS), the service account
//     signing key, a token file with an admin token, etcd's data and one
//     log file per component.
//   - etcd, kube-apiserver (RBAC authorization, loopback only, free ports
//     picked at run time) and kube-controller-manager running the
//     disruption, garbagecollector, namespace, serviceaccount,
//     serviceaccount-token and podgc controllers. Start returns once
//     /readyz answers ok and the "default" ServiceAccount exists (so the
//     controller manager is working).
//   - evictd's identity: the Namespace, ServiceAccount and RBAC objects of
//     deploy/daemonset.yaml, applied by server-side apply, and a
//     TokenRequest token for that ServiceAccount in EvictdClient,
//     EvictdConfig and the kubeconfig file EvictdKubeconfig.
//
// # A slow path to the API server
//
// StartEvictdProxy puts a reverse proxy on a loopback port in front of the
// API server, for evictd only: its Kubeconfig carries evictd's identity and
// points at the proxy, while the test's clients and the simulated nodes talk
// to the API server directly. The proxy passes every request on at once;
// for the requests its hold function picks (IsEviction: POST
// .../pods/NAME/eviction) it holds the API server's answer back, so the
// eviction takes effect while evictd waits. HeldCalls records when each
// held request arrived, was answered upstream and was released.
//
// # Teardown
//
// Stop (run by t.Cleanup, also after a failure) stops each process by its
// own process group, SIGTERM then SIGKILL, and removes the directory; a
// failed test first prints the last lines of every component's log. If
// the test binary itself dies (a `go test -timeout` panic skips cleanups),
// the kernel kills the processes with it (parent-death signal) and the
// next Start removes the directory left behind.
//
// # Outside tests
//
// StartCluster(ctx, Config) is the same without *testing.T; the command
// test/cmd/cluster runs a cluster until SIGTERM and prints KUBECONFIG and
// EVICTD_KUBECONFIG, and test/cmd/nodesim runs a simulated node, for the
// demo and for manual runs.
package framework
