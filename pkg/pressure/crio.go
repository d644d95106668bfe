// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"encoding/json"
	"fmt"
)

// CRI-O keeps its containers in a containers/storage store: the graph root
// (/var/lib/containers/storage by default) holds, for the overlay driver,
//
//	overlay-containers/containers.json           the stable containers
//	overlay-containers/volatile-containers.json  the volatile ones
//	overlay/<layer ID>/diff                      a layer's files
//	overlay/<layer ID>/merged                    a container's mount point
//
// CRI-O creates every container volatile (ContainerOptions.Volatile in its
// internal/storage createContainerOrPodSandbox), so its records are in
// volatile-containers.json; containers.json is read as well, since both are
// one store to containers/storage. Each record is a storage.Container: the
// container's ID, which is its CRI ID and so the one in its cgroup's name
// (crio-<ID>.scope, crio-<ID>), and "layer", the ID of its read-write layer,
// not the container's. Its "metadata" is a JSON string CRI-O writes
// (RuntimeContainerMetadata): "pod-name" and "pod-id" (the sandbox's name
// and ID), "name" (k8s_<container>_<pod>_<namespace>_<pod UID>_<attempt>),
// "metadata-name" (the kube container's name) and "pod", true for the
// sandbox's own (infrastructure) container, whose ID is the pod-id.
//
// The container's mount point, overlay/<layer>/merged, is mounted in CRI-O's
// mount namespace and its writable layer is overlay/<layer>/diff. That is
// the directory the kubelet measures on CRI-O: it takes pod and container
// stats from cadvisor there (UsingLegacyCadvisorStats), whose CRI-O handler
// strips "merged" from the container's root and measures "diff" with
// GetDirUsage: allocated blocks and inodes, the directory itself included,
// every hard-linked inode once, without leaving the filesystem. It leaves
// out the sandbox's container ("POD"), and so does evictd.
//
// Neither the layers' records (overlay-layers/layers.json) nor CRI-O's
// state under its run root (/run/containers/storage, a tmpfs evictd does not
// mount) is needed: the layer ID alone names the directory.

// The store's directories and files that evictd reads, under the graph
// root, for the overlay driver, the only one whose layers CRI-O and cadvisor
// measure.
const (
	crioContainersDir = "overlay-containers"
	crioLayersDir     = "overlay"
	crioLayerUpperDir = "diff"
)

// crioContainerFiles are the store's container files, both read.
var crioContainerFiles = [...]string{"volatile-containers.json", "containers.json"}

// crioContainerRecord is what evictd reads of a storage.Container.
type crioContainerRecord struct {
	ID       string `json:"id"`
	Layer    string `json:"layer"`
	Metadata string `json:"metadata"`
}

// crioContainerMetadata is what evictd reads of CRI-O's metadata string.
type crioContainerMetadata struct {
	PodID string `json:"pod-id"`
	Pod   bool   `json:"pod"`
}

// crioContainer is one of CRI-O's containers, as evictd keeps it.
type crioContainer struct {
	layer   string // the read-write layer's ID; "" when bad says why not
	sandbox bool   // the pod's infrastructure container
	bad     string // why the record cannot be used
	file    string // the file the record is in
}

// parseCRIOContainers adds to into the containers of a containers/storage
// container file, content b, keyed by container ID; file names it in the
// records. A record whose ID is not 64 hex digits is no CRI container and
// is skipped; one with a malformed layer ID or metadata is kept with the
// reason, so that the pod it belongs to can be warned of. An empty file is
// an empty store, as containers/storage reads it.
func parseCRIOContainers(b []byte, file string, into map[string]crioContainer) error {
	if len(b) == 0 {
		return nil
	}
	var recs []crioContainerRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return err
	}
	for _, r := range recs {
		if !isContainerID(r.ID) {
			continue
		}
		c := crioContainer{file: file}
		var md crioContainerMetadata
		switch {
		case !isContainerID(r.Layer):
			// Checked as well so that a record cannot name a
			// directory outside the store's layers.
			c.bad = fmt.Sprintf("layer %q is not a layer ID (64 hex digits)", r.Layer)
		case r.Metadata == "":
			c.bad = "no metadata"
		case json.Unmarshal([]byte(r.Metadata), &md) != nil:
			c.bad = fmt.Sprintf("metadata %q is not a JSON object of CRI-O's", r.Metadata)
		case md.PodID == "":
			c.bad = fmt.Sprintf("metadata %q has no pod-id: not a container of CRI-O's", r.Metadata)
		default:
			c.layer = r.Layer
			c.sandbox = md.Pod || md.PodID == r.ID
		}
		into[r.ID] = c
	}
	return nil
}
