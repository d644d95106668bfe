// SPDX-License-Identifier: Apache-2.0

// Package install names the install of evictd an agent or a cleanup
// belongs to, so that what one install writes to the cluster can be told
// from what another wrote: an install is its DaemonSet, "NAMESPACE/NAME"
// (its ID), and its Mark is the same in a form a label or taint value can
// hold. Two installs may share a cluster, even a namespace; the uninstall
// of one takes back its own state only.
package install

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotation names the install (its ID) on an object whose annotations
// evictd writes (the node Lease); Label carries its Mark where a selector
// must find it (EvictionRequests).
const (
	Annotation = "evictd.io/install"
	Label      = "evictd.io/install"
)

// FallbackNamespace and DefaultName make the default ID outside a pod:
// the shipped manifest's DaemonSet, evictd-system/evictd.
const (
	FallbackNamespace = "evictd-system"
	DefaultName       = "evictd"
)

// Default is the ID when none is given: the DaemonSet evictd in the pod's
// own namespace (POD_NAMESPACE, from the downward API), the shipped
// manifest's name; outside a pod evictd-system/evictd. The chart, whose
// DaemonSet is named after the release, always passes its own.
func Default() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns + "/" + DefaultName
	}
	return FallbackNamespace + "/" + DefaultName
}

// Parse checks an install ID, "NAMESPACE/NAME" (a DNS-1123 label and a
// DNS-1123 subdomain, as a DaemonSet's namespace and name are), and
// returns it as given.
func Parse(s string) (string, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(name, "/") {
		return "", fmt.Errorf("install %q: want NAMESPACE/NAME, the install's DaemonSet", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", fmt.Errorf("install %q: namespace %q: %s", s, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("install %q: name %q: %s", s, name, strings.Join(errs, "; "))
	}
	return s, nil
}

// markMax is a label value's length limit; markHash the hex digits of the
// ID's SHA-256 that end a mark cut to fit.
const (
	markMax  = validation.LabelValueMaxLength
	markHash = 10
)

// Mark is id as a label or taint value: "NAMESPACE.NAME" (a namespace has
// no dot, so the first dot splits it again), or, when that is longer than
// 63 characters, its first 52 followed by "-" and 10 hex digits of the
// SHA-256 of id: the same for the same install every time, and two long
// IDs sharing their first 52 characters still differ. A mark starts and
// ends with a letter or digit, as a label value must. "" for "".
func Mark(id string) string {
	if id == "" {
		return ""
	}
	m := strings.Replace(id, "/", ".", 1)
	if len(m) <= markMax {
		return m
	}
	sum := sha256.Sum256([]byte(id))
	return m[:markMax-markHash-1] + "-" + hex.EncodeToString(sum[:])[:markHash]
}

// maxInstance is the length limit of an Event's reportingInstance.
const maxInstance = 128

// Instance is the reportingInstance of the Events an agent of install id
// on node writes: "NAMESPACE/NAME@node"; when longer than an Event allows
// (128 characters), the mark in place of the ID, and the node cut with a
// hash as the mark is, so that both stay told apart.
func Instance(id, node string) string {
	if s := id + "@" + node; len(s) <= maxInstance {
		return s
	}
	prefix := Mark(id) + "@"
	room := maxInstance - len(prefix)
	if len(node) <= room {
		return prefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return prefix + node[:room-markHash-1] + "-" + hex.EncodeToString(sum[:])[:markHash]
}

// conditionPrefix and conditionSuffix wrap the ID at the end of the
// message of each Node condition an install writes (a condition has no
// label; its message is the one free-text field that is evictd's alone).
const (
	conditionPrefix = " (evictd install "
	conditionSuffix = ")"
)

// ConditionMessage is msg naming install id at its end; msg as it is for
// id "".
func ConditionMessage(msg, id string) string {
	if id == "" {
		return msg
	}
	return msg + conditionPrefix + id + conditionSuffix
}

// OfConditionMessage is the install a condition's message names (by
// ConditionMessage), or "" when it names none: a condition an evictd
// older than the install marks wrote.
func OfConditionMessage(msg string) string {
	if !strings.HasSuffix(msg, conditionSuffix) {
		return ""
	}
	i := strings.LastIndex(msg, conditionPrefix)
	if i < 0 {
		return ""
	}
	id := msg[i+len(conditionPrefix) : len(msg)-len(conditionSuffix)]
	if _, err := Parse(id); err != nil {
		return ""
	}
	return id
}
