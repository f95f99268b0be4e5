package libchain

import (
	"context"
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

// StatNetNS is the real StatNetNSFunc: NetNSStat{}.Stat.
func StatNetNS(path string) (cache.NetNSIdentity, error) {
	return NetNSStat{}.Stat(path)
}

// NetNSStat identifies network namespaces. Its zero value reads the
// kernel; a test injects readers that fail.
type NetNSStat struct {
	// NSID reads the NS_GET_ID of the nsfs file f; nil means the ioctl.
	NSID func(f *os.File) (uint64, error)
	// Cookie reads the netns cookie of a socket made in f's namespace;
	// nil means SO_NETNS_COOKIE on a socket made there (netnsCookie).
	Cookie func(f *os.File) (uint64, error)
}

// Stat is the identity of the namespace whose file is at path: the device
// and inode of the nsfs file, and the kernel's never-reused ID of the
// namespace, from the NS_GET_ID ioctl (Linux 6.18 on) or else the netns
// cookie of a socket made in it (SO_NETNS_COOKIE, Linux 5.14 on; this
// needs setns, so root). ID is 0, unknown, where neither can be read: the
// kernel reuses the inode number of a freed namespace, so an identity
// with an unknown ID never proves a namespace the same, nor another on
// the same inode (CompareNetNS).
func (s NetNSStat) Stat(path string) (cache.NetNSIdentity, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return cache.NetNSIdentity{}, fmt.Errorf("netns %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return cache.NetNSIdentity{}, fmt.Errorf("netns %s: %w", path, err)
	}
	id := cache.NetNSIdentity{Dev: st.Dev, Ino: st.Ino}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return id, nil // not an nsfs file (those are regular): never matches one
	}
	nsid, cookie := s.NSID, s.Cookie
	if nsid == nil {
		nsid = nsGetID
	}
	if cookie == nil {
		cookie = netnsCookie
	}
	if v, err := nsid(f); err == nil && v != 0 {
		id.ID = v
		return id, nil
	}
	if v, err := cookie(f); err == nil {
		id.ID = v
	}
	return id, nil
}

// nsGetID is the NS_GET_ID of the nsfs file f.
func nsGetID(f *os.File) (uint64, error) {
	var nsid uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.NS_GET_ID, uintptr(unsafe.Pointer(&nsid))); errno != 0 {
		return 0, fmt.Errorf("NS_GET_ID: %w", errno)
	}
	return nsid, nil
}

// NetNSMatch is what two identities of a namespace file say of each other.
type NetNSMatch int

// The matches.
const (
	// NetNSSame: the same inode and the same known ID.
	NetNSSame NetNSMatch = iota
	// NetNSOther: another inode, or another known ID on the same one.
	NetNSOther
	// NetNSDoubt: the same inode, but an ID unknown on either side: the
	// same namespace, or a later one on its reused inode.
	NetNSDoubt
)

// CompareNetNS compares the identity recorded at ADD with one read now. An
// unknown ID (0) is never a mismatch: on the same inode it is doubt.
func CompareNetNS(recorded, now cache.NetNSIdentity) NetNSMatch {
	switch {
	case recorded.Dev != now.Dev || recorded.Ino != now.Ino:
		return NetNSOther
	case recorded.ID == 0 || now.ID == 0:
		return NetNSDoubt
	case recorded.ID != now.ID:
		return NetNSOther
	}
	return NetNSSame
}

// netnsCookie is the SO_NETNS_COOKIE of a socket created in the namespace
// of f (onNetNSThread).
func netnsCookie(f *os.File) (uint64, error) {
	var cookie uint64
	err := onNetNSThread(func() (restored bool, err error) {
		cookie, restored, err = cookieIn(f)
		return restored, err
	})
	return cookie, err
}

// onNetNSThread runs enter on a thread of its own, locked: enter moves the
// thread into a namespace and back, and reports whether it is back. If it
// is not, the thread stays locked, and Go ends it with the goroutine.
func onNetNSThread(enter func() (restored bool, err error)) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := enter()
		if restored {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// cookieIn makes a socket in f's namespace (inNetNS) on the current
// (locked) thread and reads its netns cookie. restored reports whether the
// thread is back in its own namespace.
func cookieIn(f *os.File) (cookie uint64, restored bool, err error) {
	sock := -1
	restored, err = inNetNS(f, func() error {
		s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket in netns: %w", err)
		}
		sock = s
		return nil
	})
	if sock >= 0 {
		defer func() { _ = unix.Close(sock) }()
	}
	if err != nil {
		return 0, restored, err
	}
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
	nsSameInode                 // the ADD's inode, but an ID unknown: the same namespace or one on its reused inode
)

// netnsState compares what is at rec.NetNS with the identity recorded at
// ADD, and says why when it is not the same namespace.
func (e *Engine) netnsState(rec *cache.Record) (nsState, string) {
	return e.netnsStateAt(rec, rec.NetNS)
}

// netnsStateAt compares what is at path (the record's netns, or the one a
// runtime's DEL names) with the identity recorded at ADD.
func (e *Engine) netnsStateAt(rec *cache.Record, path string) (nsState, string) {
	if path == "" {
		return nsNone, "no netns recorded"
	}
	cur, err := e.statNetNS(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nsGone, "netns " + path + " is gone"
	case err != nil:
		return nsUnverified, "netns " + path + " cannot be read: " + err.Error()
	case rec.NetNSID == nil:
		return nsUnverified, "netns " + path + " exists, but the record (adopted, or not identified at ADD) has no identity to tell whether it is the same namespace"
	}
	switch CompareNetNS(*rec.NetNSID, cur) {
	case NetNSOther:
		return nsReplaced, "netns " + path + " is now another namespace than the ADD's"
	case NetNSDoubt:
		return nsSameInode, "netns " + path + " has the inode of the ADD's namespace, but no namespace ID (the kernel gave none, or it could not be read) tells whether it is that namespace or a later one on its reused inode"
	}
	return nsSame, "netns " + path + " still exists"
}

// teardownNetNS is the CNI_NETNS a teardown of rec passes its delegates,
// given path: the runtime's CNI_NETNS (a DEL, or the ADD's own rollback)
// or, when nobody's call asked for it (by is byNobody), the record's.
//
// Every teardown checks what is at path against the identity recorded at
// ADD, and passes path only while it is still that namespace. When another
// namespace stands there (a runtime that names netns files itself reused
// the path for a new pod) or it cannot be read, the delegates get no
// CNI_NETNS, which the spec allows for DEL: they free what they hold
// outside the namespace (IPs, rules) and leave the namespace, which may be
// another pod's, alone. A replaced namespace is logged here, once per
// teardown, and counted in the operation's journal line (Op.NetNSReplaced).
//
// A gone path is passed on as the runtime gave it (the delegates' DEL
// accepts a missing namespace); a record with no netns identity to
// compare (adopted, or not identified at ADD) keeps the runtime's path, as
// does a path on the ADD's inode whose namespace ID is unknown (recorded or now: nothing
// proves it another namespace); a teardown nobody asked for passes none of
// these, since nothing proves the path still the ADD's namespace.
func (e *Engine) teardownNetNS(ctx context.Context, rec *cache.Record, path string, by teardownBy) string {
	if path == "" {
		return ""
	}
	if rec.NetNSID == nil && by != byNobody {
		return path
	}
	state, why := e.netnsStateAt(rec, path)
	switch state {
	case nsSame:
		return path
	case nsGone:
		if by != byNobody {
			return path
		}
		return ""
	case nsSameInode:
		if by != byNobody {
			return path
		}
	case nsReplaced:
		traceOf(ctx).netnsReplaced(rec.Key)
	}
	e.log().Warn("tearing down without CNI_NETNS: "+why, "attachment", rec.Key.String(), "netns", path, "by", by.String())
	return ""
}
