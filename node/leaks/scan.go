package leaks

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/utils"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain/libcnientry"
	"github.com/catena-cni/catena/node/reconcile"
)

// DefaultMinAge is the age under which a finding is kept: an ADD may still
// be running, or its sandbox not listed yet.
const DefaultMinAge = 15 * time.Minute

// maxReservation bounds a host-local reservation file: an ID and an ifname.
const maxReservation = 4096

// Scanner looks at one node.
type Scanner struct {
	Fs afero.Fs
	// ConfDir holds the networks' configs; ResultsDir is the runtime's
	// libcni cache; CacheDir is Catena's.
	ConfDir, ResultsDir, CacheDir string
	// Sandboxes lists the runtime's sandboxes; Runtime names it for the
	// report.
	Sandboxes reconcile.SandboxLister
	Runtime   string
	// NAT is `iptables-save -t nat`'s output; nil: portmap is not looked at.
	NAT func(ctx context.Context) ([]byte, error)
	// Live reads the live network namespaces (LiveNamespaces); nil: not
	// looked at, and no reservation is a leak.
	Live func() (*Live, error)
	// Veths lists the veths on the networks' bridges (BridgeVeths); nil:
	// not looked at.
	Veths func(bridges []string) ([]Veth, error)
	// HostLocalDir is host-local's default data dir
	// ("": DefaultHostLocalDir).
	HostLocalDir string
	// Node and BootID name the node and its boot.
	Node, BootID string
	MinAge       time.Duration
	Now          func() time.Time
}

// look is what one scan read, before the verdicts.
type look struct {
	nets      map[string]*network
	sandboxes map[string]struct{}
	listErr   string
	records   map[cache.Key]bool
	// recordOf is a record of each network and container ID.
	recordOf map[[2]string]cache.Key
	// live is what the live namespaces hold; addrsErr why it is not
	// known.
	live     *Live
	addrsErr string
}

// Scan reads everything and judges each finding.
func (s *Scanner) Scan(ctx context.Context) (*Report, error) {
	now := s.Now
	if now == nil {
		now = time.Now
	}
	r := &Report{Version: ReportVersion, Node: s.Node, BootID: s.BootID, Time: now().UTC(), MinAge: s.MinAge, Findings: []Finding{}}
	var lk look
	var in Input
	lk.nets, in = readNetworks(s.Fs, s.ConfDir)
	r.Inputs = append(r.Inputs, in)

	in = Input{What: "sandboxes", Where: s.Runtime}
	ids, err := s.Sandboxes.SandboxIDs(ctx)
	if err != nil {
		in.Error, lk.listErr = err.Error(), "the runtime's sandboxes could not be listed: "+err.Error()
	}
	in.Count, lk.sandboxes = len(ids), ids
	r.Inputs = append(r.Inputs, in)

	recs, in := s.records()
	lk.records = recs
	lk.recordOf = map[[2]string]cache.Key{}
	for k := range recs {
		lk.recordOf[[2]string{k.Network, k.ContainerID}] = k
	}
	r.Inputs = append(r.Inputs, in)
	for k := range recs {
		r.Findings = append(r.Findings, Finding{Kind: KindRecord, Owner: Owner{Network: k.Network, ContainerID: k.ContainerID, IfName: k.IfName},
			Item: k.String(), Evidence: filepath.Join(s.CacheDir, "records"), Verdict: Keep,
			Why: "Catena's own record: its reconciler tears it down by the record"})
	}

	entries, cached, in := s.libcniEntries()
	r.Inputs = append(r.Inputs, in)

	in = Input{What: "addresses in live network namespaces", Where: "/proc/*/ns/net, /run/netns, /proc/*/fd"}
	if s.Live == nil {
		lk.addrsErr = "the addresses of live namespaces were not looked at"
	} else if lk.live, err = s.Live(); err != nil {
		in.Error, lk.addrsErr = err.Error(), "the addresses of live namespaces could not all be read: "+err.Error()
	}
	if lk.live == nil {
		lk.live = &Live{}
	}
	in.Count = len(lk.live.Addrs)
	r.Inputs = append(r.Inputs, in)

	defaultDir := s.HostLocalDir
	if defaultDir == "" {
		defaultDir = DefaultHostLocalDir
	}
	scanned := map[[2]string]bool{}
	for _, name := range sortedNames(lk.nets) {
		n := lk.nets[name]
		for dir, d := range n.hostLocalDirs(defaultDir) {
			scanned[[2]string{dir, n.Name}] = true
			fs, in := s.hostLocal(n, dir, d)
			r.Inputs = append(r.Inputs, in)
			r.Findings = append(r.Findings, fs...)
		}
		for dir, d := range n.flannelDirs() {
			scanned[[2]string{dir, n.Name}] = true
			fs, in := s.flannel(n, dir, d)
			r.Inputs = append(r.Inputs, in)
			r.Findings = append(r.Findings, fs...)
		}
	}
	// The dirs only a cached config names (the conf dir's moved since):
	// what its owner's ADD reserved there.
	fromCacheOnly := map[string]bool{}
	for _, c := range sortedCached(cached) {
		if c.net == nil {
			continue
		}
		for dir, d := range c.net.hostLocalDirs(defaultDir) {
			if scanned[[2]string{dir, c.net.Name}] {
				continue
			}
			scanned[[2]string{dir, c.net.Name}] = true
			fs, in := s.hostLocal(c.net, dir, d)
			in.What += " (from the libcni cache's config)"
			for _, f := range fs {
				fromCacheOnly[f.Evidence] = true
			}
			r.Inputs = append(r.Inputs, in)
			r.Findings = append(r.Findings, fs...)
		}
	}
	if s.Veths != nil {
		fs, in := s.veths(lk.nets, lk.live, lk.addrsErr)
		r.Inputs = append(r.Inputs, in)
		r.Findings = append(r.Findings, fs...)
	}
	if s.NAT != nil {
		fs, in := s.portmap(ctx, lk.nets)
		r.Inputs = append(r.Inputs, in)
		r.Findings = append(r.Findings, fs...)
	}
	inherit(r.Findings)
	withCachedConfigs(r.Findings, cached, fromCacheOnly, defaultDir)
	for i := range entries {
		why := "the runtime's own cache file: never removed here; its config is what the owner's delegates are DELed with"
		if entries[i].Why != "" {
			why = "the runtime's own cache file: never removed here; " + entries[i].Why
		}
		entries[i].Verdict, entries[i].Why = Keep, why
	}
	r.Findings = append(r.Findings, entries...)
	start := r.Time
	for i := range r.Findings {
		if r.Findings[i].Verdict == "" {
			r.Findings[i].Verdict, r.Findings[i].Why = s.judge(r.Findings[i], &lk, start)
		}
	}
	keepWithOwner(r.Findings)
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		return strings.Compare(a.Kind+a.Owner.Network+a.Item, b.Kind+b.Owner.Network+b.Item)
	})
	return r, nil
}

// judge is a finding's verdict: a leak only when everything says so; the
// first doubt keeps it.
func (s *Scanner) judge(f Finding, lk *look, now time.Time) (string, string) {
	o := f.Owner
	switch {
	case o.ContainerID == "":
		return Keep, "no owner: the file names no container"
	case o.IfName == "":
		return Keep, "its owner's ifname is not known (no reservation of the same owner names it)"
	case f.Delegate == nil && f.CachedConfig != "":
		return Keep, "the config of its owner's libcni cache entry " + f.CachedConfig + " names no delegate that made it"
	case f.Delegate == nil:
		return Keep, "no config of network " + o.Network + " names the delegate that made it"
	case lk.listErr != "":
		return Keep, lk.listErr
	case len(lk.sandboxes) == 0:
		return Keep, "the runtime lists no sandbox at all, which proves nothing"
	}
	if _, ok := lk.sandboxes[o.ContainerID]; ok {
		return Keep, "the runtime has its sandbox"
	}
	if k, ok := lk.recordOf[[2]string{o.Network, o.ContainerID}]; ok {
		return Keep, "Catena holds a record of " + k.String() + ": its reconciler decides"
	}
	if f.Kind == KindHostLocal {
		if lk.addrsErr != "" {
			return Keep, lk.addrsErr
		}
		if ip, err := netip.ParseAddr(f.Item); err != nil {
			return Keep, "not an address: " + f.Item
		} else if where, ok := lk.live.Addrs[ip]; ok {
			return Keep, "the address is on an interface in " + where
		}
	}
	if held, err := s.lockHeld(cache.Key{Network: o.Network, ContainerID: o.ContainerID, IfName: o.IfName}); held || err != nil {
		return Keep, fmt.Sprintf("Catena's lock of the attachment is held or cannot be read (%v)", err)
	}
	if f.Since.IsZero() || now.Sub(f.Since) < s.MinAge {
		return Keep, fmt.Sprintf("younger than %s (since %s)", s.MinAge, f.Since.Format(time.RFC3339))
	}
	return Leak, fmt.Sprintf("no sandbox %s among the runtime's %d, no record, no lock held, %s old",
		o.ContainerID, len(lk.sandboxes), now.Sub(f.Since).Round(time.Second))
}

// lockHeld reports whether the attachment's lock is held, without taking
// part in the locking protocol (cache.ProbeLock): a missing lock file is a
// free lock.
func (s *Scanner) lockHeld(key cache.Key) (bool, error) {
	if key.Validate() != nil {
		return false, nil
	}
	st, err := cache.ProbeLock(cache.NewFlockLocker(filepath.Join(s.CacheDir, cache.LocksDir)).Path(key))
	return st.Held, err
}

func (s *Scanner) records() (map[cache.Key]bool, Input) {
	in := Input{What: "Catena's records", Where: filepath.Join(s.CacheDir, "records")}
	recs := map[cache.Key]bool{}
	if _, err := os.Stat(s.CacheDir); os.IsNotExist(err) {
		return recs, in
	}
	st := cache.NewDiskStore(s.Fs, s.CacheDir, cache.NewFlockLocker(filepath.Join(s.CacheDir, cache.LocksDir)))
	keys, err := st.List()
	if err != nil {
		in.Error = err.Error()
	}
	for _, k := range keys {
		recs[k] = true
	}
	in.Count = len(recs)
	return recs, in
}

// libcniEntries are the runtime's libcni cache entries, one finding each,
// and the config each holds by its owner's network and container ID.
func (s *Scanner) libcniEntries() ([]Finding, map[[2]string]*cachedConf, Input) {
	in := Input{What: "libcni cache", Where: s.ResultsDir}
	cached := map[[2]string]*cachedConf{}
	if s.ResultsDir == "" {
		return nil, cached, in
	}
	entries, ok := s.listDir(s.ResultsDir, &in)
	if !ok {
		return nil, cached, in
	}
	var out []Finding
	for _, e := range entries {
		path := filepath.Join(s.ResultsDir, e.Name())
		if libcnientry.Vet(path, e) != nil {
			continue
		}
		c, err := readCachedConf(s.Fs, path)
		if c == nil {
			continue // not an entry: gone, unreadable, not JSON
		}
		in.Count++
		f := Finding{Kind: KindLibcni, Owner: c.owner, Item: e.Name(), Evidence: path, Since: e.ModTime().UTC()}
		if err != nil {
			f.Why = err.Error()
		}
		out = append(out, f)
		cached[[2]string{c.owner.Network, c.owner.ContainerID}] = c
	}
	return out, cached, in
}

func sortedCached(m map[[2]string]*cachedConf) []*cachedConf {
	out := make([]*cachedConf, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *cachedConf) int { return strings.Compare(a.path, b.path) })
	return out
}

// BootID is the node's boot ID, which a report names.
func BootID(fsys afero.Fs) (string, error) {
	b, err := fileutil.ReadSmallFile(fsys, "/proc/sys/kernel/random/boot_id", 64, true)
	if err != nil {
		return "", fmt.Errorf("boot ID: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// listDir lists dir for in: a missing dir is empty, another error is in's.
func (s *Scanner) listDir(dir string, in *Input) ([]os.FileInfo, bool) {
	entries, err := afero.ReadDir(s.Fs, dir)
	if err != nil {
		if !os.IsNotExist(err) {
			in.Error = err.Error()
		}
		return nil, false
	}
	return entries, true
}

// reservationLines are the lines of a host-local reservation: its owner's
// container ID, then its ifname.
func reservationLines(b []byte) []string {
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\r' || r == '\n' })
}

// hostLocal reads network n's reservations in dir: files named by an IP,
// each "<container ID>\r\n<ifname>" (host-local's disk store).
func (s *Scanner) hostLocal(n *network, dir string, d Delegate) ([]Finding, Input) {
	path := filepath.Join(dir, n.Name)
	in := Input{What: "host-local reservations of " + n.Name, Where: path}
	entries, ok := s.listDir(path, &in)
	if !ok {
		return nil, in
	}
	var out []Finding
	for _, e := range entries {
		ip, err := netip.ParseAddr(e.Name())
		if err != nil || !e.Mode().IsRegular() {
			continue // lock, last_reserved_ip.N
		}
		file := filepath.Join(path, e.Name())
		b, err := fileutil.ReadSmallFile(s.Fs, file, maxReservation, true)
		f := Finding{Kind: KindHostLocal, Owner: Owner{Network: n.Name}, Item: ip.String(), Evidence: file, Since: e.ModTime().UTC(), Delegate: &d}
		if err != nil {
			f.Verdict, f.Why = Keep, "unreadable: "+err.Error()
		} else {
			lines := reservationLines(b)
			if len(lines) > 0 && utils.ValidateContainerID(lines[0]) == nil {
				f.Owner.ContainerID = lines[0]
			}
			if len(lines) > 1 && utils.ValidateInterfaceName(lines[1]) == nil {
				f.Owner.IfName = lines[1]
			}
		}
		in.Count++
		out = append(out, f)
	}
	return out, in
}

// flannel reads flannel's scratch files of network n in dir: one per
// container, named by its ID. A file whose network is another's (flannel
// writes one dir for all its networks) is still this one's to look at:
// its owner's reservation, on n, says whose it is.
func (s *Scanner) flannel(n *network, dir string, d Delegate) ([]Finding, Input) {
	in := Input{What: "flannel's scratch files of " + n.Name, Where: dir}
	entries, ok := s.listDir(dir, &in)
	if !ok {
		return nil, in
	}
	var out []Finding
	for _, e := range entries {
		if !e.Mode().IsRegular() || utils.ValidateContainerID(e.Name()) != nil {
			continue
		}
		in.Count++
		out = append(out, Finding{Kind: KindFlannel, Owner: Owner{Network: n.Name, ContainerID: e.Name()}, Item: e.Name(),
			Evidence: filepath.Join(dir, e.Name()), Since: e.ModTime().UTC(), Delegate: &d})
	}
	return out, in
}

// dnatJump is portmap's rule that sends a container's host ports to its
// DNAT chain, commented with the network and the container.
var dnatJump = regexp.MustCompile(`^-A CNI-HOSTPORT-DNAT .*--comment "dnat name: \\"([^"\\]+)\\" id: \\"([^"\\]+)\\"".* -j (CNI-DN-[0-9a-f]+)`)

// portmap finds portmap's per-container DNAT chains of the networks in
// iptables-save's nat table.
func (s *Scanner) portmap(ctx context.Context, nets map[string]*network) ([]Finding, Input) {
	in := Input{What: "portmap's DNAT chains", Where: "iptables-save -t nat"}
	out, err := s.NAT(ctx)
	if err != nil {
		in.Error = err.Error()
		return nil, in
	}
	seen := map[string]bool{}
	var fs []Finding
	for line := range bytes.SplitSeq(out, []byte("\n")) {
		m := dnatJump.FindSubmatch(line)
		if m == nil || seen[string(m[3])] {
			continue
		}
		seen[string(m[3])] = true
		net, id := string(m[1]), string(m[2])
		f := Finding{Kind: KindPortmap, Owner: Owner{Network: net, ContainerID: id}, Item: string(m[3]), Evidence: strings.TrimSpace(string(line))}
		if n := nets[net]; n != nil {
			f.Delegate = n.delegateOfType("portmap")
		}
		// iptables keeps no time: the chain is as old as the oldest of
		// the owner's other findings (its reservation), else unknown.
		in.Count++
		fs = append(fs, f)
	}
	return fs, in
}

// inherit gives a finding that has no time of its own (a portmap chain)
// the time and the ifname of the owner's host-local reservation on the
// same network: what made both was one ADD.
func inherit(fs []Finding) {
	byOwner := map[[2]string]Finding{}
	for _, f := range fs {
		if f.Kind == KindHostLocal && f.Owner.ContainerID != "" {
			byOwner[[2]string{f.Owner.Network, f.Owner.ContainerID}] = f
		}
	}
	for i, f := range fs {
		if f.Kind != KindPortmap && f.Kind != KindFlannel {
			continue
		}
		if r, ok := byOwner[[2]string{f.Owner.Network, f.Owner.ContainerID}]; ok {
			fs[i].Since, fs[i].Owner.IfName = r.Since, r.Owner.IfName
		}
	}
}

// NATTable is `iptables-save -t nat`, bounded: the Scanner's and the
// Releaser's NAT on a real node.
func NATTable(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "iptables-save", "-t", "nat")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("iptables-save -t nat: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}

// keepWithOwner keeps every finding of an owner one of whose findings is
// kept: a doubt about one thing of the owner (its address live somewhere)
// is a doubt about the rest (its chain).
func keepWithOwner(fs []Finding) {
	kept := map[Owner]string{}
	for _, f := range fs {
		if f.Verdict == Keep && f.Kind != KindRecord && f.Kind != KindLibcni && f.Owner.ContainerID != "" {
			if _, ok := kept[f.Owner]; !ok {
				kept[f.Owner] = f.Kind + " " + f.Item + " is kept: " + f.Why
			}
		}
	}
	for i, f := range fs {
		if why, ok := kept[f.Owner]; ok && f.Verdict == Leak {
			fs[i].Verdict, fs[i].Why = Keep, "the same owner's "+why
		}
	}
}
