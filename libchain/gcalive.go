package libchain

import (
	"fmt"

	"github.com/catena-cni/catena/cache"
)

// procLook is at most one scan of the node's processes per GC, made when a
// record first needs it: a GC with nothing to tear down scans nothing.
type procLook struct {
	scanner ProcessScanner // nil: no scan
	done    bool
	procs   NetNSProcesses
	err     error
}

func (l *procLook) get() (NetNSProcesses, error) {
	if !l.done {
		l.done = true
		l.procs, l.err = l.scanner.Scan()
	}
	return l.procs, l.err
}

// stillAlive says why GC must keep rec, which it would tear down because
// the runtime's list omits it (or, with GCOptions.StaleNetNS, because its
// netns path is gone or replaced), or "" if nothing speaks for it:
//
//   - the namespace of its ADD (rec.NetNSID) holds a process: its sandbox
//     runs, whatever the runtime lists (where either side's namespace ID
//     is unknown, a process in any namespace with its inode counts);
//   - the scan could not see every process, and its netns path is still
//     the namespace of its ADD (or cannot be read);
//   - it has no netns identity (adopted, or not identified at ADD) and its netns path still
//     exists, so that nothing tells whether its sandbox is gone;
//   - the runtime's list is empty (emptyList: null or []), which proves
//     nothing (a runtime that forgot its sandboxes, or the wrong one), and
//     nothing else proves its sandbox gone: only a netns path that is gone
//     or holds another namespace does. A namespace still at its path with
//     no process in it is no proof: a namespace pinned by a bind mount
//     outlives its processes, and a live pod can have none (CRI-O's
//     drop_infra_ctr, its default, runs no infra process, and its
//     containers may wait minutes to restart). Nor is a path that cannot
//     be read, or no netns recorded at all.
//
// Otherwise a record with no netns, or whose namespace holds no process,
// is not kept: a runtime that lists other attachments decides for it.
// Without a scanner only the rules of identity and of the empty list apply.
func (e *Engine) stillAlive(rec *cache.Record, look *procLook, emptyList bool) string {
	if rec.NetNS == "" {
		if emptyList {
			return emptyListKeeps("no netns is recorded to prove its sandbox gone")
		}
		return ""
	}
	state, why := e.netnsState(rec)
	if rec.NetNSID == nil {
		if state == nsGone {
			return ""
		}
		return why + ": kept while its netns exists"
	}
	if look.scanner != nil {
		procs, err := look.get()
		if who := procs.Holder(*rec.NetNSID); who != "" {
			return fmt.Sprintf("netns %s still holds a process (%s)", rec.NetNS, who)
		}
		doubt := procs.Incomplete
		if err != nil {
			doubt = err.Error()
		}
		if doubt != "" && (state == nsSame || state == nsUnverified || state == nsSameInode) {
			return fmt.Sprintf("%s, and whether a process is in it is unknown (%s)", why, doubt)
		}
	}
	if emptyList && (state == nsSame || state == nsUnverified || state == nsSameInode) {
		return emptyListKeeps(why)
	}
	return ""
}

// emptyListKeeps is why a record is kept under an empty valid list.
func emptyListKeeps(why string) string {
	return "the runtime listed no attachment, and " + why +
		": under an empty list only a netns path gone or holding another namespace proves its sandbox gone"
}
