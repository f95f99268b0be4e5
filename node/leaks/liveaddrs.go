package leaks

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/catena-cni/catena/libchain"
)

// LiveAddrs are the addresses on an interface of any network namespace a
// process is in, or one bind-mounted under /run/netns or /var/run/netns,
// each with where it was seen: an address there is in use, whatever the
// runtime says. It enters each namespace once (root). A namespace it could
// not read is an error: the caller keeps every reservation then.
func LiveAddrs() (map[netip.Addr]string, error) {
	type nsID struct{ dev, ino uint64 }
	seen := map[nsID]bool{}
	addrs := map[netip.Addr]string{}
	var errs []error
	look := func(path, where string) {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return // the process exited, or no such file
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
			if _, ok := addrs[a]; !ok {
				addrs[a] = where
			}
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("live namespaces: %w", err)
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		look(filepath.Join("/proc", p.Name(), "ns", "net"), "the netns of pid "+p.Name())
	}
	for _, dir := range []string{"/run/netns", "/var/run/netns"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			look(path, path)
		}
	}
	return addrs, errors.Join(errs...)
}
