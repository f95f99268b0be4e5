package libchain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
)

// StatNetNSFunc returns the identity of the network namespace whose file is
// at path (CNI_NETNS: a bind mount under /var/run/netns or /proc/PID/ns/net).
type StatNetNSFunc func(path string) (cache.NetNSIdentity, error)

var _ StatNetNSFunc = StatNetNS

// StatNetNS is the real StatNetNSFunc: the device and inode of the nsfs
// file, and the kernel's never-reused ID of the namespace, from the
// NS_GET_ID ioctl (Linux 6.18 on) or else the netns cookie of a socket made
// in it (SO_NETNS_COOKIE, Linux 5.14 on; this needs setns, so root). ID is 0
// where neither is available; the identity then rests on the inode number
// alone, which the kernel reuses once a namespace is freed.
func StatNetNS(path string) (cache.NetNSIdentity, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return cache.NetNSIdentity{}, fmt.Errorf("netns %s: %w", path, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return cache.NetNSIdentity{}, fmt.Errorf("netns %s: %w", path, err)
	}
	id := cache.NetNSIdentity{Dev: st.Dev, Ino: st.Ino}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return id, nil // not an nsfs file (those are regular): never matches one
	}
	var nsid uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.NS_GET_ID, uintptr(unsafe.Pointer(&nsid))); errno == 0 {
		id.ID = nsid
		return id, nil
	}
	if cookie, err := netnsCookie(f); err == nil {
		id.ID = cookie
	}
	return id, nil
}

// netnsCookie is the SO_NETNS_COOKIE of a socket created in the namespace
// of f. It runs on a thread of its own, locked; if that thread cannot be
// put back into its own namespace it stays locked, and Go ends it with the
// goroutine.
func netnsCookie(f *os.File) (uint64, error) {
	type answer struct {
		cookie uint64
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		runtime.LockOSThread()
		cookie, restored, err := cookieIn(f)
		if restored {
			runtime.UnlockOSThread()
		}
		done <- answer{cookie, err}
	}()
	a := <-done
	return a.cookie, a.err
}

// cookieIn enters f's namespace on the current (locked) thread, makes a
// socket there, returns to the thread's own namespace and reads the
// socket's netns cookie. restored reports whether the thread is back.
func cookieIn(f *os.File) (cookie uint64, restored bool, err error) {
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return 0, true, err
	}
	defer self.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return 0, true, fmt.Errorf("entering netns: %w", err)
	}
	sock, serr := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		if serr == nil {
			_ = unix.Close(sock)
		}
		return 0, false, fmt.Errorf("returning from netns: %w", err)
	}
	if serr != nil {
		return 0, true, fmt.Errorf("socket in netns: %w", serr)
	}
	defer unix.Close(sock)
	v, err := unix.GetsockoptUint64(sock, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, true, fmt.Errorf("SO_NETNS_COOKIE: %w", err)
	}
	return v, true, nil
}

func (e *Engine) statNetNS(path string) (cache.NetNSIdentity, error) {
	if e.StatNetNS != nil {
		return e.StatNetNS(path)
	}
	return StatNetNS(path)
}

// netnsIdentity is the identity recorded at ADD for CNI_NETNS, or nil (no
// netns, or it cannot be read: later teardowns then pass no netns).
func (e *Engine) netnsIdentity(key cache.Key, path string) *cache.NetNSIdentity {
	if path == "" {
		return nil
	}
	id, err := e.statNetNS(path)
	if err != nil {
		e.log().Info("cannot identify the netns: a teardown no runtime asks for will pass no CNI_NETNS",
			"attachment", key.String(), "netns", path, "error", err)
		return nil
	}
	return &id
}

// nsState is what is at a record's netns path now.
type nsState int

const (
	nsNone       nsState = iota // no netns recorded
	nsSame                      // the very namespace of the ADD
	nsGone                      // nothing there
	nsReplaced                  // another namespace (or file) is there
	nsUnverified                // something is there, but it cannot be told apart
)

// netnsState compares what is at rec.NetNS with the identity recorded at
// ADD, and says why when it is not the same namespace.
func (e *Engine) netnsState(rec *cache.Record) (nsState, string) {
	if rec.NetNS == "" {
		return nsNone, "no netns recorded"
	}
	cur, err := e.statNetNS(rec.NetNS)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nsGone, "netns " + rec.NetNS + " is gone"
	case err != nil:
		return nsUnverified, "netns " + rec.NetNS + " cannot be read: " + err.Error()
	case rec.NetNSID == nil:
		return nsUnverified, "netns " + rec.NetNS + " exists, but the record (from an earlier build) has no identity to tell whether it is the same namespace"
	case cur != *rec.NetNSID:
		return nsReplaced, "netns " + rec.NetNS + " is now another namespace"
	}
	return nsSame, "netns " + rec.NetNS + " still exists"
}

// recordedNetNS is the CNI_NETNS for a teardown of rec that no runtime asked
// for: the ADD's netns only while the file there is still that namespace.
// Otherwise none, which the spec allows for DEL: the delegates then free
// what they hold outside the namespace (IPs, rules) and leave the
// namespace, which is not theirs any more, alone.
func (e *Engine) recordedNetNS(rec *cache.Record) string {
	state, why := e.netnsState(rec)
	switch state {
	case nsSame:
		return rec.NetNS
	case nsNone, nsGone:
	default:
		e.log().Warn("tearing down without CNI_NETNS: "+why, "attachment", rec.Key.String(), "netns", rec.NetNS)
	}
	return ""
}
