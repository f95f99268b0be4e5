package libchain

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// NetNSHoldsFunc reports whether the network namespace whose file is at
// path has an interface named ifname that holds one of ips (addresses
// without prefix). A DEL with no record passes its CNI_NETNS to the
// delegates only on that proof (noRecordNetNS).
type NetNSHoldsFunc func(path, ifname string, ips map[string]bool) (bool, error)

var _ NetNSHoldsFunc = NetNSHolds

// NetNSHolds is the real NetNSHoldsFunc: it lists the namespace's
// interfaces and ifname's addresses from inside it (inNetNS, on a thread of
// its own: onNetNSThread; root). No interface of that name is false, not an
// error.
func NetNSHolds(path, ifname string, ips map[string]bool) (bool, error) {
	byIface, err := netnsAddrs(path)
	if err != nil {
		return false, fmt.Errorf("netns %s: %s: %w", path, ifname, err)
	}
	for _, addr := range byIface[ifname] {
		if ipn, ok := addr.(*net.IPNet); ok && ips[ipn.IP.String()] {
			return true, nil
		}
	}
	return false, nil
}

// NetNSAddrs lists the addresses of every interface of the network
// namespace whose file is at path (a /proc/<pid>/ns/net or a bind mount),
// without their prefix, from inside it (root).
func NetNSAddrs(path string) ([]netip.Addr, error) {
	byIface, err := netnsAddrs(path)
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", path, err)
	}
	var out []netip.Addr
	for _, addrs := range byIface {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
					out = append(out, ip.Unmap())
				}
			}
		}
	}
	return out, nil
}

// netnsAddrs are the addresses of each interface of the namespace at path,
// by name (inNetNS, on a thread of its own: onNetNSThread).
func netnsAddrs(path string) (map[string][]net.Addr, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	byIface := map[string][]net.Addr{}
	err = onNetNSThread(func() (bool, error) {
		return inNetNS(f, func() error {
			ifaces, err := net.Interfaces()
			if err != nil {
				return err
			}
			for _, iface := range ifaces {
				addrs, err := iface.Addrs()
				if err != nil {
					return fmt.Errorf("%s: %w", iface.Name, err)
				}
				byIface[iface.Name] = addrs
			}
			return nil
		})
	})
	return byIface, err
}

// inNetNS runs fn in f's namespace on the current (locked) thread and
// returns the thread to its own; restored reports whether it is back.
func inNetNS(f *os.File, fn func() error) (restored bool, err error) {
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return true, err
	}
	defer func() { _ = self.Close() }()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("entering netns: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		return false, errors.Join(ferr, fmt.Errorf("returning from netns: %w", err))
	}
	return true, ferr
}

// noRecordNetNS is the CNI_NETNS a DEL with no record passes its
// delegates: the runtime's, only when the namespace at that path has the
// DEL's ifname holding one of the addresses of its prevResult (want),
// which no live record names (heldElsewhere checked that): then it is the
// ADD's namespace, and bridge and ptp can free what they find from inside
// it (the veth, the ipMasq rules). Else none, as the spec allows for DEL.
func (e *Engine) noRecordNetNS(req Request, want map[string]bool) string {
	if e.NetNSHolds == nil || req.Args.NetNS == "" || len(want) == 0 {
		return ""
	}
	ok, err := e.NetNSHolds(req.Args.NetNS, req.Args.IfName, want)
	if err != nil {
		e.log().Info("DEL with no record: the netns cannot be checked; releasing without CNI_NETNS",
			"attachment", req.Key().String(), "netns", req.Args.NetNS, "error", err)
		return ""
	}
	if !ok {
		return ""
	}
	return req.Args.NetNS
}
