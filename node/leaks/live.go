package leaks

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/libchain"
)

// Live is what the node's live network namespaces hold: every namespace a
// process is in, one bind-mounted under /run/netns or /var/run/netns, and
// one only an open file descriptor holds.
type Live struct {
	// Addrs are the addresses on their interfaces, each with where it
	// was seen: an address there is in use, whatever the runtime says.
	Addrs map[netip.Addr]string
	// IDs are the namespaces by their ID in this (the host's) namespace,
	// the ID a veth's peer is named by.
	IDs map[int]Holder
}

// Holder says what keeps a namespace alive.
type Holder struct {
	Where string
	// OnlyFD: no process is in it and no mount holds it, an open file
	// descriptor does.
	OnlyFD bool
}

// LiveNamespaces enters each live network namespace once (root) and reads
// its addresses and its ID. A namespace it could not read is an error:
// the caller keeps every reservation then.
func LiveNamespaces() (*Live, error) {
	type nsID struct{ dev, ino uint64 }
	seen := map[nsID]bool{}
	live := &Live{Addrs: map[netip.Addr]string{}, IDs: map[int]Holder{}}
	var errs []error
	look := func(path string, h Holder) {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return // the process exited, the fd was closed, no such file
		}
		id := nsID{dev: uint64(st.Dev), ino: st.Ino} //nolint:unconvert // Dev is uint64 on amd64 only
		if seen[id] {
			return
		}
		seen[id] = true
		as, err := libchain.NetNSAddrs(path)
		if err != nil {
			if _, serr := os.Stat(path); serr == nil { // not just a process that exited
				errs = append(errs, err)
			}
			return
		}
		for _, a := range as {
			if _, ok := live.Addrs[a]; !ok {
				live.Addrs[a] = h.Where
			}
		}
		if nsid, err := nsidOf(path); err == nil && nsid >= 0 {
			live.IDs[nsid] = h
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("live namespaces: %w", err)
	}
	var pids []string
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err == nil {
			pids = append(pids, p.Name())
		}
	}
	for _, pid := range pids {
		look(filepath.Join("/proc", pid, "ns", "net"), Holder{Where: "the netns of pid " + pid})
	}
	for _, dir := range []string{"/run/netns", "/var/run/netns"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			look(path, Holder{Where: path})
		}
	}
	// Last, the namespaces only an open fd holds (a runtime's, a
	// leaked one): their addresses are in use too.
	var self syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &self); err != nil {
		return nil, fmt.Errorf("live namespaces: %w", err)
	}
	me := strconv.Itoa(os.Getpid())
	for _, pid := range pids {
		if pid == me {
			continue
		}
		dir := filepath.Join("/proc", pid, "fd")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			path := filepath.Join(dir, fd.Name())
			if netNSFD(path, uint64(self.Dev)) { //nolint:unconvert // Dev is uint64 on amd64 only
				look(path, Holder{Where: "an open fd of pid " + pid + " (" + comm(pid) + ")", OnlyFD: true})
			}
		}
	}
	return live, errors.Join(errs...)
}

// netNSFD reports whether the open fd at path (/proc/<pid>/fd/<n>) is a
// network namespace, nsfs being device nsfsDev. Only what its link may
// name one is looked at: "net:[<inode>]", a path through a netns dir (a
// bind mount), "/" (one whose mount is gone); a socket or a file is never
// stat'ed, so a hung mount cannot stall the scan.
func netNSFD(path string, nsfsDev uint64) bool {
	target, err := os.Readlink(path)
	if err != nil {
		return false
	}
	if maybe := strings.HasPrefix(target, "net:[") || strings.Contains(target, "/netns/") || target == "/"; !maybe {
		return false
	}
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil || uint64(st.Dev) != nsfsDev { //nolint:unconvert // Dev is uint64 on amd64 only
		return false
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return false
	}
	defer func() { _ = unix.Close(fd) }()
	t, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	return err == nil && t == unix.CLONE_NEWNET
}

func comm(pid string) string {
	b, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
	return strings.TrimSpace(string(b))
}

// nsidOf is the ID this namespace gives the namespace at path, or -1.
func nsidOf(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, err
	}
	defer func() { _ = f.Close() }()
	return netlink.GetNetNsIdByFd(int(f.Fd()))
}

// Veth is a veth on a bridge of this namespace.
type Veth struct {
	Name, Bridge string
	// PeerNSID is the ID of the namespace its peer is in; -1: this one.
	PeerNSID int
}

// BridgeVeths are the veths whose master is one of bridges; a bridge that
// does not exist has none.
func BridgeVeths(bridges []string) ([]Veth, error) {
	byIndex := map[int]string{}
	for _, b := range bridges {
		l, err := netlink.LinkByName(b)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				continue
			}
			return nil, fmt.Errorf("bridge %s: %w", b, err)
		}
		byIndex[l.Attrs().Index] = b
	}
	if len(byIndex) == 0 {
		return nil, nil
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("links: %w", err)
	}
	var out []Veth
	for _, l := range links {
		a := l.Attrs()
		if b, ok := byIndex[a.MasterIndex]; ok && l.Type() == "veth" {
			out = append(out, Veth{Name: a.Name, Bridge: b, PeerNSID: a.NetNsID})
		}
	}
	return out, nil
}
