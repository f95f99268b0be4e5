package leaks

import (
	"fmt"
	"slices"
)

// veths are the veths on the networks' bridges whose peer is in no
// namespace a process is in or a mount holds. Each is kept, with what
// holds its namespace: no DEL removes a veth without its namespace, and
// the kernel removes it with the namespace once nothing holds that.
func (s *Scanner) veths(nets map[string]*network, live *Live, liveErr string) ([]Finding, Input) {
	in := Input{What: "veths on the networks' bridges", Where: "netlink"}
	netOf := map[string]string{}
	var bridges []string
	for _, name := range sortedNames(nets) {
		for _, b := range nets[name].bridges() {
			if _, ok := netOf[b]; !ok {
				netOf[b] = name
				bridges = append(bridges, b)
			}
		}
	}
	slices.Sort(bridges)
	if len(bridges) == 0 {
		return nil, in
	}
	vs, err := s.Veths(bridges)
	if err != nil {
		in.Error = err.Error()
		return nil, in
	}
	in.Count = len(vs)
	var out []Finding
	for _, v := range vs {
		if v.PeerNSID < 0 {
			continue // both ends here: not a pod's
		}
		h, known := live.IDs[v.PeerNSID]
		if known && !h.OnlyFD {
			continue // a live pod's, or a mounted namespace's
		}
		f := Finding{Kind: KindVeth, Owner: Owner{Network: netOf[v.Bridge]}, Item: v.Name,
			Evidence: fmt.Sprintf("master %s, peer in the namespace of ID %d", v.Bridge, v.PeerNSID), Verdict: Keep}
		switch {
		case known:
			f.Why = "its peer's namespace is held only by " + h.Where + ": that process holds the namespace, and the veth goes with it once closed; no DEL removes a veth without its namespace"
		case liveErr != "":
			f.Why = "not every live namespace could be read (" + liveErr + "): its peer's may be one of them"
		default:
			f.Why = "its peer's namespace is held by nothing Catena can see (no process in it, no mount under /run/netns, no open fd: a mount elsewhere, or a kernel reference); no DEL removes a veth without its namespace"
		}
		out = append(out, f)
	}
	return out, in
}
