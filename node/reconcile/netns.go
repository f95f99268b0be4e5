package reconcile

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// NetNSObserver is what a pass sees of the node's network namespaces
// (ProcNetNS on a real node).
type NetNSObserver interface {
	// Stat is the identity of the namespace whose file is at path
	// (libchain.StatNetNS); a missing path is fs.ErrNotExist.
	Stat(path string) (cache.NetNSIdentity, error)
	// Scan looks at every process (and thread) of the node once.
	Scan() (Processes, error)
}

// Processes is one look at the node's processes: which namespaces hold
// one, and whether every process was seen.
type Processes = libchain.NetNSProcesses

// Verdict is what a record's netns says of its sandbox.
type Verdict int

// The verdicts.
const (
	// NSUnknown: nothing proves the sandbox alive or gone (no netns or
	// no identity recorded, unreadable).
	NSUnknown Verdict = iota
	// NSAlive: a process is in the namespace of the record's ADD (or,
	// where not every process can be seen, its file is still that
	// namespace): the sandbox runs, whatever the runtime lists.
	NSAlive
	// NSDead: proof that the sandbox is gone: no process is in the
	// namespace of its ADD, and the file at its path is gone or is
	// another namespace.
	NSDead
	// NSIdle: the file at its path is still the namespace of its ADD, and
	// no process is in it. Neither proof of life nor of death: a namespace
	// pinned by a bind mount outlives its processes, and a live pod can
	// have none for minutes (CRI-O's drop_infra_ctr, its default, runs no
	// infra process; its containers may wait to restart). The runtime's
	// list decides; an empty one proves nothing.
	NSIdle
)

// Evidence is a Verdict and why.
type Evidence struct {
	Verdict Verdict
	Why     string
}

// judge tells what rec's netns says of its sandbox, from one look at the
// node's processes. Only a record whose ADD recorded the namespace's
// identity can be proved gone, and only by its path: gone, or holding
// another namespace. Any doubt is NSUnknown, NSIdle or NSAlive.
func judge(obs NetNSObserver, procs Processes, rec *cache.Record) Evidence {
	path := rec.NetNS
	if path == "" {
		return Evidence{NSUnknown, "no netns recorded"}
	}
	cur, err := obs.Stat(path)
	if rec.NetNSID == nil {
		if who := procs.Holder(cur); err == nil && who != "" {
			return Evidence{NSAlive, fmt.Sprintf("%s is in netns %s (the record has no netns identity to tell whether it is the namespace of its ADD)", who, path)}
		}
		return Evidence{NSUnknown, "the record (adopted, or not identified at ADD) has no netns identity to prove its namespace gone"}
	}
	// Holder and CompareNetNS read an unknown namespace ID (0, recorded
	// or now) as doubt, never as another namespace.
	if who := procs.Holder(*rec.NetNSID); who != "" {
		return Evidence{NSAlive, fmt.Sprintf("%s is in the netns of its ADD (%s)", who, path)}
	}
	complete := procs.Incomplete == ""
	match := libchain.CompareNetNS(*rec.NetNSID, cur)
	switch {
	case err == nil && match == libchain.NetNSSame && complete:
		return Evidence{NSIdle, fmt.Sprintf("netns %s is still that of its ADD, and no process is in it (a pinned namespace outlives its processes: no proof its sandbox is gone)", path)}
	case err == nil && match == libchain.NetNSDoubt && complete:
		return Evidence{NSIdle, fmt.Sprintf("netns %s has the inode of its ADD's namespace (whose ID is unknown), and no process is in a namespace with that inode (no proof its sandbox is gone)", path)}
	case err == nil && match == libchain.NetNSSame:
		return Evidence{NSAlive, fmt.Sprintf("netns %s is still that of its ADD (whether a process is in it is unknown: %s)", path, procs.Incomplete)}
	case err == nil && match == libchain.NetNSDoubt:
		return Evidence{NSAlive, fmt.Sprintf("netns %s has the inode of its ADD's namespace, and no namespace ID tells whether it is that one (whether a process is in it is unknown: %s)", path, procs.Incomplete)}
	case err == nil && complete:
		return Evidence{NSDead, fmt.Sprintf("netns %s is now another namespace, and no process is in that of its ADD", path)}
	case err == nil:
		return Evidence{NSDead, fmt.Sprintf("netns %s is now another namespace", path)}
	case !errors.Is(err, fs.ErrNotExist):
		return Evidence{NSUnknown, fmt.Sprintf("netns %s cannot be read: %v", path, err)}
	case complete:
		return Evidence{NSDead, fmt.Sprintf("netns %s is gone, and no process is in the namespace of its ADD", path)}
	}
	// Not every process is seen: a missing file proves the namespace
	// gone only if its directory is there to be seen.
	if _, err := obs.Stat(filepath.Dir(path)); err != nil {
		return Evidence{NSUnknown, fmt.Sprintf("netns %s is not here, nor is its directory: %v", path, err)}
	}
	return Evidence{NSDead, fmt.Sprintf("netns %s is gone", path)}
}
