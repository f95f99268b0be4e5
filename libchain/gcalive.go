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
//   - it has no identity (an earlier build) and its netns path still
//     exists, so that nothing tells whether its sandbox is gone.
//
// A record with no netns, or whose path is gone and no process holds its
// namespace, is not kept. Without a scanner only the last rule applies.
func (e *Engine) stillAlive(rec *cache.Record, look *procLook) string {
	if rec.NetNS == "" {
		return ""
	}
	state, why := e.netnsState(rec)
	if rec.NetNSID == nil {
		if state == nsGone {
			return ""
		}
		return why + ": kept while its netns exists"
	}
	if look.scanner == nil {
		return ""
	}
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
	return ""
}
