package leaks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
)

var t0 = time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)

// node is a node's dirs: a conf dir with network "net" [bridge with
// host-local in ipamDir, portmap], a libcni cache, Catena's cache dir.
type node struct {
	t                                 *testing.T
	confDir, ipamDir, results, catena string
	sandboxes                         map[string]struct{}
	listErr                           error
	addrs                             map[netip.Addr]string
	nsids                             map[int]Holder
	veths                             []Veth
	nat                               string
}

func newNode(t *testing.T) *node {
	t.Helper()
	d := t.TempDir()
	n := &node{t: t, confDir: filepath.Join(d, "conf"), ipamDir: filepath.Join(d, "ipam"), results: filepath.Join(d, "results"),
		catena: filepath.Join(d, "catena"), sandboxes: map[string]struct{}{"live": {}}, addrs: map[netip.Addr]string{}}
	for _, dir := range []string{n.confDir, filepath.Join(n.ipamDir, "net"), n.results, n.catena} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"net","plugins":[{"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","dataDir":%q}},{"type":"portmap","capabilities":{"portMappings":true}}]}`, n.ipamDir)
	require.NoError(t, os.WriteFile(filepath.Join(n.confDir, "10-net.conflist"), []byte(conf), 0o600))
	return n
}

// reserve writes host-local's reservation of ip for id and ifname, made at.
func (n *node) reserve(ip, id, ifname string, at time.Time) {
	n.t.Helper()
	path := filepath.Join(n.ipamDir, "net", ip)
	require.NoError(n.t, os.WriteFile(path, []byte(id+"\r\n"+ifname), 0o600))
	require.NoError(n.t, os.Chtimes(path, at, at))
}

// cacheEntry writes the runtime's libcni cache entry of id and ifname on
// "net", whose config [bridge with host-local in ipamDir, portmap] carries
// "mtu":1400 (the conf dir's does not).
func (n *node) cacheEntry(id, ifname, ipamDir string) string {
	n.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"net","plugins":[{"type":"bridge","bridge":"cni0","mtu":1400,"ipam":{"type":"host-local","dataDir":%q}},{"type":"portmap","capabilities":{"portMappings":true}}]}`, ipamDir)
	e, err := json.Marshal(map[string]any{"kind": "cniCacheV1", "containerId": id, "ifName": ifname, "networkName": "net",
		"config": []byte(conf), "result": map[string]any{"cniVersion": "1.1.0"}})
	require.NoError(n.t, err)
	path := filepath.Join(n.results, "net-"+id+"-"+ifname)
	require.NoError(n.t, os.WriteFile(path, e, 0o600))
	return path
}

// chain adds portmap's DNAT chain of id to the nat table.
func (n *node) chain(name, id string) {
	n.nat += fmt.Sprintf(":%[1]s - [0:0]\n-A %[1]s -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.0.0.2:80\n"+
		"-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"net\\\" id: \\\"%[2]s\\\"\" -m multiport --dports 8080 -j %[1]s\n", name, id)
}

type lister struct{ n *node }

func (l lister) SandboxIDs(context.Context) (map[string]struct{}, error) {
	return l.n.sandboxes, l.n.listErr
}

func (n *node) scanner() *Scanner {
	return &Scanner{Fs: afero.NewOsFs(), ConfDir: n.confDir, ResultsDir: n.results, CacheDir: n.catena, Sandboxes: lister{n}, Runtime: "fake",
		NAT:   func(context.Context) ([]byte, error) { return []byte(n.nat), nil },
		Live:  func() (*Live, error) { return &Live{Addrs: n.addrs, IDs: n.nsids}, nil },
		Veths: func([]string) ([]Veth, error) { return n.veths, nil },
		Node:  "node-1", BootID: "boot-1", MinAge: DefaultMinAge, Now: func() time.Time { return t0 }}
}

func (n *node) scan() *Report {
	n.t.Helper()
	r, err := n.scanner().Scan(context.Background())
	require.NoError(n.t, err)
	return r
}

func verdicts(r *Report) map[string]string {
	m := map[string]string{}
	for _, f := range r.Findings {
		m[f.Kind+" "+f.Item] = f.Verdict + ": " + f.Why
	}
	return m
}

// TestScanVerdicts: a reservation is a leak only when every check agrees;
// each doubt keeps it, and says which.
func TestScanVerdicts(t *testing.T) {
	old := t0.Add(-time.Hour)
	tests := []struct {
		name  string
		setup func(n *node)
		item  string
		want  string // the verdict and a part of the reason
	}{
		{"no sandbox, old", nil, "10.0.0.5", "leak: no sandbox gone"},
		{"its sandbox is live", func(n *node) { n.reserve("10.0.0.5", "live", "eth0", old) }, "10.0.0.5", "keep: the runtime has its sandbox"},
		{"young", func(n *node) { n.reserve("10.0.0.5", "gone", "eth0", t0.Add(-time.Minute)) }, "10.0.0.5", "keep: younger than 15m0s"},
		{"an empty sandbox list", func(n *node) { n.sandboxes = map[string]struct{}{} }, "10.0.0.5", "keep: the runtime lists no sandbox"},
		{"the runtime down", func(n *node) { n.listErr = errors.New("connection refused") }, "10.0.0.5", "keep: the runtime's sandboxes could not be listed"},
		{"its address in a live netns", func(n *node) { n.addrs[netip.MustParseAddr("10.0.0.5")] = "the netns of pid 42" }, "10.0.0.5", "keep: the address is on an interface in the netns of pid 42"},
		{"no owner in the file", func(n *node) { n.reserve("10.0.0.5", "", "", old) }, "10.0.0.5", "keep: no owner"},
		{"a libcni cache entry with no config", func(n *node) {
			require.NoError(t, os.WriteFile(filepath.Join(n.results, "net-gone-eth0"), []byte(`{"kind":"cniCacheV1","containerId":"gone","ifName":"eth0","networkName":"net"}`), 0o600))
		}, "10.0.0.5", "keep: its owner's libcni cache entry " /* then its path */},
		{"a libcni cache entry of another ifname", func(n *node) { n.cacheEntry("gone", "net1", n.ipamDir) }, "10.0.0.5", "keep: its owner's libcni cache entry "},
		{"a libcni cache entry whose config has no host-local there", func(n *node) { n.cacheEntry("gone", "eth0", "/elsewhere") }, "10.0.0.5",
			"keep: the config of its owner's libcni cache entry "},
		{"a libcni cache entry with the config", func(n *node) { n.cacheEntry("gone", "eth0", n.ipamDir) }, "10.0.0.5", "leak: no sandbox gone"},
		{"a Catena record", func(n *node) {
			st := cache.NewDiskStore(afero.NewOsFs(), n.catena, cache.NewFlockLocker(filepath.Join(n.catena, cache.LocksDir)))
			require.NoError(t, st.Save(&cache.Record{Key: cache.Key{Network: "net", ContainerID: "gone", IfName: "eth0"}, Phase: cache.PhaseComplete}))
		}, "10.0.0.5", "keep: Catena holds a record of net/gone/eth0"},
		{"Catena's lock held", func(n *node) {
			u, err := cache.NewFlockLocker(filepath.Join(n.catena, cache.LocksDir)).Lock(context.Background(), cache.Key{Network: "net", ContainerID: "gone", IfName: "eth0"}, cache.Holder{Verb: "ADD"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = u.Unlock() })
		}, "10.0.0.5", "keep: Catena's lock of the attachment is held"},
		{"a portmap chain of the leak", func(n *node) { n.chain("CNI-DN-abc", "gone") }, "CNI-DN-abc", "leak: no sandbox gone"},
		{"a portmap chain whose owner's address is live", func(n *node) {
			n.chain("CNI-DN-abc", "gone")
			n.addrs[netip.MustParseAddr("10.0.0.5")] = "/run/netns/lost"
		}, "CNI-DN-abc", "keep: the same owner's host-local 10.0.0.5 is kept: the address is on an interface in /run/netns/lost"},
		{"a portmap chain of nothing known", func(n *node) { n.chain("CNI-DN-def", "other") }, "CNI-DN-def", "keep: its owner's ifname is not known"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			n.reserve("10.0.0.5", "gone", "eth0", old)
			n.reserve("10.0.0.2", "live", "eth0", old)
			require.NoError(t, os.WriteFile(filepath.Join(n.ipamDir, "net", "last_reserved_ip.0"), []byte("10.0.0.5"), 0o600))
			if tt.setup != nil {
				tt.setup(n)
			}
			r := n.scan()
			v := verdicts(r)
			kind := KindHostLocal
			if strings.HasPrefix(tt.item, "CNI-DN") {
				kind = KindPortmap
			}
			verdict, part, _ := strings.Cut(tt.want, ": ")
			got := v[kind+" "+tt.item]
			assert.True(t, strings.HasPrefix(got, verdict+": "), "%s: %s", tt.item, got)
			for _, w := range strings.Fields(part) {
				assert.Contains(t, got, w)
			}
			assert.True(t, strings.HasPrefix(v[KindHostLocal+" 10.0.0.2"], "keep: "), "a live pod's reservation: %s", v[KindHostLocal+" 10.0.0.2"])
			assert.NotContains(t, v, KindHostLocal+" last_reserved_ip.0")
			assert.Equal(t, "node-1", r.Node)
			assert.Equal(t, ReportVersion, r.Version)
		})
	}
}

// TestScanPortmapInherits: a portmap chain takes its owner's ifname and
// age from the owner's reservation, and names portmap as its delegate.
func TestScanPortmapInherits(t *testing.T) {
	n := newNode(t)
	n.reserve("10.0.0.5", "gone", "net1", t0.Add(-time.Hour))
	n.chain("CNI-DN-abc", "gone")
	for _, f := range n.scan().Findings {
		switch f.Kind {
		case KindPortmap:
			assert.Equal(t, Owner{Network: "net", ContainerID: "gone", IfName: "net1"}, f.Owner)
			assert.Equal(t, &Delegate{Index: 1, Type: "portmap"}, f.Delegate)
			assert.Equal(t, Leak, f.Verdict)
		case KindHostLocal:
			assert.Equal(t, &Delegate{Index: 0, Type: "bridge"}, f.Delegate)
		}
	}
}

func reportAt(t *testing.T, n *node, at time.Time) *Report {
	t.Helper()
	s := n.scanner()
	s.Now = func() time.Time { return at }
	r, err := s.Scan(context.Background())
	require.NoError(t, err)
	return r
}

// TestConfirm: only what every report and the fresh look agree on, with
// the same owner; reports of another node or boot, or too close, are
// refused whole.
func TestConfirm(t *testing.T) {
	n := newNode(t)
	n.reserve("10.0.0.5", "gone", "eth0", t0.Add(-2*time.Hour))
	n.reserve("10.0.0.6", "gone2", "eth0", t0.Add(-2*time.Hour))
	r1 := reportAt(t, n, t0.Add(-30*time.Minute))
	n.reserve("10.0.0.7", "gone3", "eth0", t0.Add(-2*time.Hour)) // only in the second
	n.sandboxes["gone2"] = struct{}{}                            // a pod created between: kept
	r2 := reportAt(t, n, t0.Add(-10*time.Minute))
	n.reserve("10.0.0.5", "newpod", "eth0", t0.Add(-20*time.Hour)) // reused by another owner after the reports
	n.reserve("10.0.0.8", "gone4", "eth0", t0.Add(-2*time.Hour))
	now := reportAt(t, n, t0)

	release, refused, err := Confirm([]*Report{r1, r2}, now, DefaultConfirmAfter)
	require.NoError(t, err)
	assert.Empty(t, release, "nothing is a leak in both reports and now")
	why := map[string]string{}
	for _, r := range refused {
		why[r.Finding.Item] = r.Why
	}
	assert.Equal(t, map[string]string{"10.0.0.5": "not a leak now: gone", "10.0.0.6": "a leak in 1 of the 2 reports only",
		"10.0.0.7": "a leak in 1 of the 2 reports only"}, why)

	n2 := newNode(t)
	n2.reserve("10.0.0.5", "gone", "eth0", t0.Add(-2*time.Hour))
	a, b, now2 := reportAt(t, n2, t0.Add(-20*time.Minute)), reportAt(t, n2, t0.Add(-time.Minute)), reportAt(t, n2, t0)
	release, refused, err = Confirm([]*Report{a, b}, now2, DefaultConfirmAfter)
	require.NoError(t, err)
	require.Len(t, release, 1)
	assert.Equal(t, "10.0.0.5", release[0].Item)
	assert.Empty(t, refused)

	// A record of the owner made after the reports (Catena's ADD of a
	// new pod with that container ID): the fresh look keeps it.
	st := cache.NewDiskStore(afero.NewOsFs(), n2.catena, cache.NewFlockLocker(filepath.Join(n2.catena, cache.LocksDir)))
	require.NoError(t, st.Save(&cache.Record{Key: cache.Key{Network: "net", ContainerID: "gone", IfName: "eth0"}, Phase: cache.PhaseComplete}))
	release, refused, err = Confirm([]*Report{a, b}, reportAt(t, n2, t0), DefaultConfirmAfter)
	require.NoError(t, err)
	assert.Empty(t, release, "the reports are older than the record that names the owner now")
	require.Len(t, refused, 1)
	assert.Contains(t, refused[0].Why, "not a leak now: Catena holds a record of net/gone/eth0")

	other := *a
	other.BootID = "boot-0"
	node := *a
	node.Node = "node-2"
	for name, tc := range map[string]struct {
		reports []*Report
		want    string
	}{
		"one report":   {[]*Report{a}, "a release needs two"},
		"too close":    {[]*Report{b, now2}, "less than 15m0s"},
		"another boot": {[]*Report{&other, b}, "another boot"},
		"another node": {[]*Report{&node, b}, `node "node-2"`},
	} {
		_, _, err := Confirm(tc.reports, now2, DefaultConfirmAfter)
		assert.ErrorContains(t, err, tc.want, name)
	}
}

// fakeExec records each DEL and, like host-local, removes the owner's
// reservation unless it fails.
type fakeExec struct {
	mu    sync.Mutex
	n     *node
	calls []libchain.Call
	fail  string // delegate type whose DEL fails
	keep  bool   // the DEL succeeds but frees nothing
}

var _ libchain.Executor = (*fakeExec)(nil)

func (f *fakeExec) Add(context.Context, libchain.Call) (types.Result, error) {
	return nil, errors.New("no ADD here")
}

func (f *fakeExec) Run(_ context.Context, c libchain.Call) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	if c.Type == f.fail {
		return types.NewError(11, c.Type+" DEL failed", "")
	}
	if f.keep {
		return nil
	}
	if c.Type == "bridge" {
		var conf struct {
			IPAM struct {
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		}
		if err := json.Unmarshal(c.Config, &conf); err != nil {
			return err
		}
		dir := filepath.Join(conf.IPAM.DataDir, "net")
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			if string(b) == c.Args.ContainerID+"\r\n"+c.Args.IfName {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	if c.Type == "portmap" {
		var kept []string
		for _, l := range strings.Split(f.n.nat, "\n") {
			if l != "" && !strings.Contains(l, `id: \"`+c.Args.ContainerID+`\"`) {
				kept = append(kept, l)
			}
		}
		f.n.nat = strings.Join(kept, "\n")
	}
	return nil
}

func (n *node) releaser(x *fakeExec, ops *[]events.Op) *Releaser {
	return &Releaser{Fs: afero.NewOsFs(), ConfDir: n.confDir, CacheDir: n.catena, CNIPath: "/opt/cni/bin", Exec: x,
		NAT: func(context.Context) ([]byte, error) { return []byte(n.nat), nil }, OnOp: func(op events.Op) { *ops = append(*ops, op) }}
}

// TestRelease: each confirmed leak goes through its own delegate's DEL,
// the later delegate first, with the owner and no netns; a DEL that fails,
// or frees nothing, leaves the finding and says so; a finding changed
// since is not DELed; a dry run DELs nothing.
func TestRelease(t *testing.T) {
	tests := []struct {
		name      string
		fail      string
		keep      bool
		dryRun    bool
		reuse     bool
		wantCalls []string
		wantErr   string
		wantLeft  bool
	}{
		{name: "released", wantCalls: []string{"DEL portmap gone/eth0", "DEL bridge gone/eth0"}},
		{name: "a DEL that fails", fail: "bridge", wantCalls: []string{"DEL portmap gone/eth0", "DEL bridge gone/eth0"},
			wantErr: "bridge DEL failed", wantLeft: true},
		{name: "a DEL that frees nothing", keep: true, wantCalls: []string{"DEL portmap gone/eth0", "DEL bridge gone/eth0"},
			wantErr: "still held", wantLeft: true},
		{name: "reused since", reuse: true, wantCalls: []string{"DEL portmap gone/eth0"}, wantErr: "another owner now", wantLeft: true},
		{name: "dry run", dryRun: true, wantLeft: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			n.reserve("10.0.0.5", "gone", "eth0", t0.Add(-time.Hour))
			n.chain("CNI-DN-abc", "gone")
			leaks := n.scan().Leaks()
			require.Len(t, leaks, 2)
			if tt.reuse {
				n.reserve("10.0.0.5", "newpod", "eth0", t0)
			}
			x := &fakeExec{n: n, fail: tt.fail, keep: tt.keep}
			var ops []events.Op
			rel := n.releaser(x, &ops)
			rel.DryRun = tt.dryRun
			out := rel.Release(context.Background(), leaks)
			var calls []string
			for _, c := range x.calls {
				assert.Empty(t, c.Args.NetNS, "no CNI_NETNS")
				assert.Equal(t, "/opt/cni/bin", c.Args.Path)
				var conf map[string]any
				require.NoError(t, json.Unmarshal(c.Config, &conf))
				assert.Equal(t, "net", conf["name"])
				assert.Equal(t, "1.1.0", conf["cniVersion"])
				calls = append(calls, c.Verb+" "+c.Type+" "+c.Args.ContainerID+"/"+c.Args.IfName)
			}
			assert.Equal(t, tt.wantCalls, calls)
			var errs []string
			for _, r := range out {
				if r.Error != "" {
					errs = append(errs, r.Error)
				}
			}
			if tt.wantErr == "" {
				assert.Empty(t, errs)
			} else {
				assert.Contains(t, strings.Join(errs, "; "), tt.wantErr)
			}
			_, err := os.Stat(filepath.Join(n.ipamDir, "net", "10.0.0.5"))
			assert.Equal(t, tt.wantLeft, err == nil, "the reservation left")
			if !tt.dryRun {
				require.NotEmpty(t, ops, "journaled")
				assert.Equal(t, VerbRelease, ops[0].Verb)
			} else {
				assert.Empty(t, ops)
			}
		})
	}
}

func TestReadReport(t *testing.T) {
	dir := t.TempDir()
	good, _ := json.Marshal(Report{Version: ReportVersion, Node: "n", BootID: "b", Time: t0})
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	_, err := ReadReport(afero.NewOsFs(), write("good", good, 0o600))
	require.NoError(t, err)
	_, err = ReadReport(afero.NewOsFs(), write("writable", good, 0o666))
	assert.ErrorContains(t, err, "writable by group or others")
	v2, _ := json.Marshal(Report{Version: 2, Node: "n", BootID: "b", Time: t0})
	_, err = ReadReport(afero.NewOsFs(), write("v2", v2, 0o600))
	assert.ErrorContains(t, err, "version 2")
	_, err = ReadReport(afero.NewOsFs(), write("junk", []byte("junk"), 0o600))
	assert.ErrorContains(t, err, "not a leak report")
	require.NoError(t, os.Symlink(filepath.Join(dir, "good"), filepath.Join(dir, "link")))
	_, err = ReadReport(afero.NewOsFs(), filepath.Join(dir, "link"))
	assert.Error(t, err, "a symlink")
}

// TestScanFlannel: flannel's scratch file and the reservation its
// delegate's host-local made are flannel's to release: one DEL of flannel
// for the owner, with the ifname of the reservation.
func TestScanFlannel(t *testing.T) {
	n := newNode(t)
	scratch := filepath.Join(t.TempDir(), "flannel")
	require.NoError(t, os.MkdirAll(scratch, 0o700))
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"fnet","plugins":[{"type":"flannel","dataDir":%q,"delegate":{"hairpinMode":true}},{"type":"portmap","capabilities":{"portMappings":true}}]}`, scratch)
	require.NoError(t, os.WriteFile(filepath.Join(n.confDir, "20-fnet.conflist"), []byte(conf), 0o600))
	defaultDir := filepath.Join(t.TempDir(), "networks")
	require.NoError(t, os.MkdirAll(filepath.Join(defaultDir, "fnet"), 0o700))
	old := t0.Add(-time.Hour)
	for path, body := range map[string]string{filepath.Join(defaultDir, "fnet", "10.244.0.7"): "gone\r\neth0", filepath.Join(scratch, "gone"): "{}",
		filepath.Join(scratch, "live"): "{}"} {
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		require.NoError(t, os.Chtimes(path, old, old))
	}
	s := n.scanner()
	s.HostLocalDir = defaultDir
	r, err := s.Scan(context.Background())
	require.NoError(t, err)
	got := map[string]string{}
	for _, f := range r.Findings {
		if f.Owner.Network == "fnet" {
			got[f.Kind+" "+f.Item] = f.Verdict + " " + f.Owner.IfName + " " + fmt.Sprint(f.Delegate)
		}
	}
	assert.Equal(t, map[string]string{
		KindHostLocal + " 10.244.0.7": "leak eth0 &{0 flannel}",
		KindFlannel + " gone":         "leak eth0 &{0 flannel}",
		KindFlannel + " live":         "keep  &{0 flannel}",
	}, got)

	x := &fakeExec{n: n}
	var ops []events.Op
	var leaks []Finding
	for _, f := range r.Leaks() {
		if f.Owner.Network == "fnet" {
			leaks = append(leaks, f)
		}
	}
	out := n.releaser(x, &ops).Release(context.Background(), leaks)
	require.Len(t, out, 1, "one DEL of flannel for the owner")
	require.Len(t, x.calls, 1)
	assert.Equal(t, "flannel", x.calls[0].Type)
	assert.Equal(t, "eth0", x.calls[0].Args.IfName)
	assert.Contains(t, out[0].Error, "still held", "the fake flannel freed nothing")
}

// TestReleaseCachedConfig: an owner whose libcni cache entry holds the
// config its ADD ran with is found in the data dir that config names,
// though the conf dir's has moved since, and is DELed with that config; a
// reservation there of an owner with no entry is kept (its config is
// unknown).
func TestReleaseCachedConfig(t *testing.T) {
	n := newNode(t)
	moved := t.TempDir()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"net","plugins":[{"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","dataDir":%q}}]}`, moved)
	require.NoError(t, os.WriteFile(filepath.Join(n.confDir, "10-net.conflist"), []byte(conf), 0o600))
	n.reserve("10.0.0.5", "gone", "eth0", t0.Add(-time.Hour))
	n.reserve("10.0.0.6", "unknown", "eth0", t0.Add(-time.Hour))
	entry := n.cacheEntry("gone", "eth0", n.ipamDir)

	r := n.scan()
	v := verdicts(r)
	assert.True(t, strings.HasPrefix(v[KindHostLocal+" 10.0.0.6"], "keep: no config of network net names the delegate"), v[KindHostLocal+" 10.0.0.6"])
	assert.True(t, strings.HasPrefix(v[KindLibcni+" net-gone-eth0"], "keep: the runtime's own cache file"), v[KindLibcni+" net-gone-eth0"])
	leaks := r.Leaks()
	require.Len(t, leaks, 1, "%v", v)
	assert.Equal(t, "10.0.0.5", leaks[0].Item)
	assert.Equal(t, entry, leaks[0].CachedConfig)
	assert.Equal(t, &Delegate{Index: 0, Type: "bridge"}, leaks[0].Delegate)

	x := &fakeExec{n: n}
	var ops []events.Op
	out := n.releaser(x, &ops).Release(context.Background(), leaks)
	require.Len(t, out, 1)
	assert.Empty(t, out[0].Error)
	require.Len(t, x.calls, 1)
	var got map[string]any
	require.NoError(t, json.Unmarshal(x.calls[0].Config, &got))
	assert.EqualValues(t, 1400, got["mtu"], "DELed with the cached config, not the conf dir's")
	assert.Equal(t, n.ipamDir, got["ipam"].(map[string]any)["dataDir"])
	_, err := os.Stat(filepath.Join(n.ipamDir, "net", "10.0.0.5"))
	assert.True(t, os.IsNotExist(err), "released")
	_, err = os.Stat(filepath.Join(n.ipamDir, "net", "10.0.0.6"))
	assert.NoError(t, err, "the owner with no entry keeps its reservation")

	// An entry rewritten for another owner since the reports: refused.
	n.reserve("10.0.0.5", "gone", "eth0", t0.Add(-time.Hour))
	require.NoError(t, os.Remove(entry))
	n.cacheEntry("other", "eth0", n.ipamDir)
	require.NoError(t, os.Rename(filepath.Join(n.results, "net-other-eth0"), entry))
	x = &fakeExec{n: n}
	out = n.releaser(x, &ops).Release(context.Background(), leaks)
	require.Len(t, out, 1)
	assert.Contains(t, out[0].Error, "is of net/other/eth0 now")
	assert.Empty(t, x.calls)
}

// TestScanVeths: a veth on the network's bridge whose peer is in a live
// process's or a mounted namespace is not a finding; one whose peer's
// namespace only an open fd holds, or nothing seen, is reported and kept;
// one with both ends here is not a pod's.
func TestScanVeths(t *testing.T) {
	n := newNode(t)
	n.nsids = map[int]Holder{1: {Where: "the netns of pid 42"}, 2: {Where: "/run/netns/a"}, 3: {Where: "an open fd of pid 7 (runtime)", OnlyFD: true}}
	n.veths = []Veth{{Name: "vethlive", Bridge: "cni0", PeerNSID: 1}, {Name: "vethmount", Bridge: "cni0", PeerNSID: 2},
		{Name: "vethfd", Bridge: "cni0", PeerNSID: 3}, {Name: "vethgone", Bridge: "cni0", PeerNSID: 9}, {Name: "vethhost", Bridge: "cni0", PeerNSID: -1}}
	var asked []string
	s := n.scanner()
	s.Veths = func(b []string) ([]Veth, error) { asked = b; return n.veths, nil }
	r, err := s.Scan(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"cni0"}, asked, "the bridges of the conf dir's networks")
	v := verdicts(r)
	assert.NotContains(t, v, KindVeth+" vethlive")
	assert.NotContains(t, v, KindVeth+" vethmount")
	assert.NotContains(t, v, KindVeth+" vethhost")
	assert.Contains(t, v[KindVeth+" vethfd"], "keep: its peer's namespace is held only by an open fd of pid 7 (runtime)")
	assert.Contains(t, v[KindVeth+" vethgone"], "keep: its peer's namespace is held by nothing Catena can see")
	assert.Empty(t, r.Leaks(), "a veth is never a leak to release")
}
