package libchain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/catena-cni/catena/cache"
)

// ProcessScanner looks at every process (and thread) of the node once:
// which network namespaces hold a process. GC asks it before it tears
// down a record the runtime no longer lists (Engine.Procs), and the node
// reconciler before it reclaims one.
type ProcessScanner interface {
	Scan() (NetNSProcesses, error)
}

// NetNSProcesses is one look at the node's processes.
type NetNSProcesses struct {
	// In names one process in each network namespace some process is in,
	// by the namespace's full identity ("pid 123 (pause)").
	In map[cache.NetNSIdentity]string
	// Incomplete, when set, says why some processes may not have been
	// seen (not in the host's PID namespace, a /proc entry unreadable):
	// then no namespace is known to have no process in it.
	Incomplete string
}

// Holder names a process in the namespace id, or is "". Where id's ID or
// the scan's is unknown (0), a process in a namespace with the same inode
// counts: an unknown ID is doubt, which keeps, never proof of another
// namespace.
func (p NetNSProcesses) Holder(id cache.NetNSIdentity) string {
	if who := p.In[id]; who != "" {
		return who
	}
	for seen, who := range p.In {
		if CompareNetNS(id, seen) == NetNSDoubt {
			return who
		}
	}
	return ""
}

// initPIDNS is /proc/self/ns/pid in the host's (initial) PID namespace:
// the kernel's fixed inode number of init_pid_ns (PROC_PID_INIT_INO).
const initPIDNS = "pid:[4026531836]"

// ProcScanner is the ProcessScanner of the node this process runs on: it
// finds the processes in each namespace through
// /proc/<pid>/task/<tid>/ns/net and identifies each namespace once with
// StatNetNS. It sees every process only in the host's PID namespace;
// elsewhere its Scan says it is incomplete.
type ProcScanner struct {
	// Proc is procfs' mount point; "" means /proc.
	Proc string
	// StatNetNS identifies a namespace; nil means StatNetNS.
	StatNetNS StatNetNSFunc
}

var _ ProcessScanner = ProcScanner{}

func (p ProcScanner) proc() string {
	if p.Proc != "" {
		return p.Proc
	}
	return "/proc"
}

func (p ProcScanner) stat(path string) (cache.NetNSIdentity, error) {
	if p.StatNetNS != nil {
		return p.StatNetNS(path)
	}
	return StatNetNS(path)
}

// Scan implements ProcessScanner: every thread of every process but this
// one (whose own threads only enter a namespace to identify it), one
// identity per distinct namespace. A process that exits meanwhile is
// skipped; any other unreadable entry makes the look incomplete. Its cost
// is one directory read per process, one stat per thread and one
// StatNetNS per distinct namespace (docs/design.md, "GC").
func (p ProcScanner) Scan() (NetNSProcesses, error) {
	procs := NetNSProcesses{In: map[cache.NetNSIdentity]string{}}
	if self, err := os.Readlink(filepath.Join(p.proc(), "self", "ns", "pid")); err != nil {
		procs.Incomplete = fmt.Sprintf("this process's PID namespace cannot be read: %v", err)
	} else if self != initPIDNS {
		procs.Incomplete = "this process is not in the host's PID namespace (run it with hostPID)"
	}
	entries, err := os.ReadDir(p.proc())
	if err != nil {
		procs.Incomplete = fmt.Sprintf("%s cannot be read: %v", p.proc(), err)
		return procs, fmt.Errorf("netns scan: %w", err)
	}
	seen := map[[2]uint64]bool{}
	me := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		err = p.scanProcess(pid, seen, &procs)
		if errors.Is(err, fs.ErrPermission) && p.inRootCgroup(pid) {
			continue // not a pod's (see inRootCgroup)
		}
		if err != nil && procs.Incomplete == "" {
			procs.Incomplete = err.Error()
		}
	}
	return procs, nil
}

// inRootCgroup reports whether pid is in the root cgroup of every
// hierarchy. A CRI runtime always puts a sandbox's processes in the pod's
// own cgroup, so such a process, even one whose namespaces cannot be read
// (an init an LSM or the hypervisor guards), is never a pod's.
func (p ProcScanner) inRootCgroup(pid int) bool {
	raw, err := os.ReadFile(filepath.Join(p.proc(), strconv.Itoa(pid), "cgroup"))
	if err != nil || len(raw) == 0 {
		return false
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		if _, path, ok := strings.Cut(line[strings.Index(line, ":")+1:], ":"); !ok || path != "/" {
			return false
		}
	}
	return true
}

// procGone reports whether err says a process or thread exited meanwhile.
func procGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// scanProcess adds the namespaces of pid's threads not seen yet.
func (p ProcScanner) scanProcess(pid int, seen map[[2]uint64]bool, procs *NetNSProcesses) error {
	dir := filepath.Join(p.proc(), strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if procGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s cannot be read: %w", dir, err)
	}
	for _, t := range tasks {
		link := filepath.Join(dir, t.Name(), "ns", "net")
		fi, err := os.Stat(link)
		if procGone(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s cannot be read: %w", link, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || seen[[2]uint64{st.Dev, st.Ino}] {
			continue
		}
		id, err := p.stat(link)
		if procGone(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s cannot be identified: %w", link, err)
		}
		seen[[2]uint64{st.Dev, st.Ino}] = true
		comm, _ := os.ReadFile(filepath.Join(p.proc(), strconv.Itoa(pid), "comm"))
		procs.In[id] = fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm)))
	}
	return nil
}
