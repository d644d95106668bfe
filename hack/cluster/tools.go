// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the Kubernetes commands this module builds: the control
// plane for every e2e test, the scheduler and kubelet of the VM node
// (test/vmnode), and kubectl, with which test/deploy runs the docs' commands.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
