package reconcile

import (
	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// ProcNetNS is the NetNSObserver of the node this process runs on: it
// stats netns files with libchain.StatNetNS and finds the processes in
// each namespace with libchain.ProcScanner, the scanner GC uses too. It
// sees every process only in the host's PID namespace (catena-agent needs
// hostPID); elsewhere its Scan says it is incomplete.
type ProcNetNS struct {
	// Proc is procfs' mount point; "" means /proc.
	Proc string
	// StatNetNS identifies a namespace; nil means libchain.StatNetNS.
	StatNetNS libchain.StatNetNSFunc
}

var _ NetNSObserver = ProcNetNS{}

// Stat implements NetNSObserver.
func (p ProcNetNS) Stat(path string) (cache.NetNSIdentity, error) {
	if p.StatNetNS != nil {
		return p.StatNetNS(path)
	}
	return libchain.StatNetNS(path)
}

// Scan implements NetNSObserver (libchain.ProcScanner.Scan).
func (p ProcNetNS) Scan() (Processes, error) {
	return libchain.ProcScanner{Proc: p.Proc, StatNetNS: p.StatNetNS}.Scan()
}
