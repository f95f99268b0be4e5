package reconcile

import (
	"strconv"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// infraKey is the CNI_ARGS key by which CRI runtimes (containerd, CRI-O)
// name the sandbox of an attachment.
const infraKey = "K8S_POD_INFRA_CONTAINER_ID"

// InScope reports whether rec was made by a CRI runtime: its CNI_ARGS carry
// K8S_POD_INFRA_CONTAINER_ID equal to its container ID. Records made by
// cnitool, podman or anything else are never reclaimed.
func InScope(rec *cache.Record) bool {
	for k, v := range libchain.CNIArgs(rec.Args) {
		if k == infraKey {
			return v == rec.Key.ContainerID
		}
	}
	return false
}

// Version identifies one state of a record: every save changes it (Save
// sets Updated), so a mark made at one version is stale at any other.
func Version(rec *cache.Record) string {
	return strconv.FormatInt(rec.Updated.UnixNano(), 10) + "/" + string(rec.Phase)
}
