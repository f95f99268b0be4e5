package libchain

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// fakeNetNS is a table of paths to namespace identities: what a runtime
// creates and deletes under /var/run/netns.
type fakeNetNS struct {
	mu   sync.Mutex
	at   map[string]cache.NetNSIdentity
	errs map[string]error
	next uint64
}

func newFakeNetNS() *fakeNetNS {
	return &fakeNetNS{at: map[string]cache.NetNSIdentity{}, errs: map[string]error{}}
}

// create puts a fresh namespace at path (inode and ID never seen before).
func (f *fakeNetNS) create(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.at[path] = cache.NetNSIdentity{Dev: 4, Ino: 4026531000 + f.next, ID: f.next}
}

// reuseInode puts a new namespace at path that has the inode of the old
// one (the kernel reuses a freed namespace's inode number) but a new ID.
func (f *fakeNetNS) reuseInode(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	old := f.at[path]
	f.at[path] = cache.NetNSIdentity{Dev: old.Dev, Ino: old.Ino, ID: f.next}
}

func (f *fakeNetNS) remove(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.at, path)
}

func (f *fakeNetNS) stat(path string) (cache.NetNSIdentity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[path]; err != nil {
		return cache.NetNSIdentity{}, err
	}
	id, ok := f.at[path]
	if !ok {
		return cache.NetNSIdentity{}, fmt.Errorf("netns %s: %w", path, fs.ErrNotExist)
	}
	return id, nil
}

var _ StatNetNSFunc = newFakeNetNS().stat

// TestNetNSState: what a teardown passes as CNI_NETNS, whoever asked for
// it, and what GC --stale-netns makes of the record, for every state of
// the path.
func TestNetNSState(t *testing.T) {
	const path = "/var/run/netns/x"
	tests := []struct {
		name      string
		netns     string
		recorded  bool // the record has the ADD's identity
		then      func(f *fakeNetNS)
		wantState nsState
		// CNI_NETNS of a teardown nobody asked for, and of a runtime's
		// DEL (or rollback) that names path
		wantNobody, wantRuntime string
	}{
		{name: "no netns recorded", netns: "", wantState: nsNone, wantRuntime: path},
		{name: "same namespace", netns: path, recorded: true, then: func(*fakeNetNS) {}, wantState: nsSame, wantNobody: path, wantRuntime: path},
		{name: "gone", netns: path, recorded: true, then: func(f *fakeNetNS) { f.remove(path) }, wantState: nsGone, wantRuntime: path},
		{name: "another namespace at the path", netns: path, recorded: true, then: func(f *fakeNetNS) { f.create(path) }, wantState: nsReplaced},
		{name: "another namespace with the reused inode", netns: path, recorded: true, then: func(f *fakeNetNS) { f.reuseInode(path) }, wantState: nsReplaced},
		{name: "unreadable", netns: path, recorded: true, then: func(f *fakeNetNS) { f.errs[path] = fs.ErrPermission }, wantState: nsUnverified},
		{name: "record with no netns identity, path exists", netns: path, then: func(*fakeNetNS) {}, wantState: nsUnverified, wantRuntime: path},
		{name: "record with no netns identity, path gone", netns: path, then: func(f *fakeNetNS) { f.remove(path) }, wantState: nsGone, wantRuntime: path},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNetNS()
			f.create(path)
			eng := &Engine{StatNetNS: f.stat}
			rec := &cache.Record{Key: cache.Key{Network: "podnet", ContainerID: "c1", IfName: "eth0"}, NetNS: tc.netns, Args: "K=V"}
			if tc.recorded {
				rec.NetNSID = eng.netnsIdentity(rec.Key, tc.netns)
				require.NotNil(t, rec.NetNSID)
			}
			if tc.then != nil {
				tc.then(f)
			}
			state, why := eng.netnsState(rec)
			assert.Equal(t, tc.wantState, state, why)
			args := argsFor(rec, "/opt/cni/bin")
			assert.Equal(t, RuntimeArgs{ContainerID: "c1", IfName: "eth0", Args: "K=V", Path: "/opt/cni/bin", NetNS: tc.netns}, args)
			ctx, trace := eng.begin(context.Background(), "TEST", rec.Key)
			assert.Equal(t, tc.wantNobody, eng.teardownNetNS(ctx, rec, args.NetNS, byNobody), "nobody's teardown")
			for _, by := range []teardownBy{byRuntime, byRollback} {
				assert.Equal(t, tc.wantRuntime, eng.teardownNetNS(ctx, rec, path, by), by.String())
			}
			replaced := 0
			if tc.wantState == nsReplaced {
				replaced = 3 // once per teardown
			}
			assert.Len(t, trace.op.NetNSReplaced, replaced)
		})
	}
}

// nsHarness runs fake delegates over a DiskStore on a MemMapFs (so that
// the retry after ADD has its teardown index) and fake namespaces, created
// before each ADD as a runtime does.
type nsHarness struct {
	exec  *fakeExec
	store *cache.DiskStore
	eng   *Engine
	ns    *fakeNetNS
	clock *clock
	conf  *NetConf
}

func newNSHarness(t *testing.T) *nsHarness {
	h := &nsHarness{exec: newFakeExec(), ns: newFakeNetNS(), clock: newClock(),
		store: cache.NewDiskStore(afero.NewMemMapFs(), "/var/lib/cni/catena", cache.NewMemLocker())}
	h.eng = &Engine{Store: h.store, Exec: h.exec, StatNetNS: h.ns.stat, Now: h.clock.now}
	h.conf = chainConf(t, "1.1.0", dIPAM, dPort)
	return h
}

func (h *nsHarness) add(t *testing.T, cid string) {
	t.Helper()
	r := req(h.conf, cid)
	h.ns.create(r.Args.NetNS)
	_, err := h.eng.Add(context.Background(), r)
	require.NoError(t, err)
}

// TestEveryTeardownChecksTheNamespace: a record needs teardown; its netns
// path then holds the same namespace, or another one (a runtime that names
// netns files itself reused it for a new pod). Every teardown, whoever
// asks for it (the runtime's DEL naming that path, a retry pass, GC,
// repair, the agent's RETRY and RECLAIM, a repeated ADD), passes the path
// only in the first case, and the operation's journal line names the
// attachment in the second.
func TestEveryTeardownChecksTheNamespace(t *testing.T) {
	heal := map[string]func(t *testing.T, h *nsHarness){
		"runtime's DEL": func(t *testing.T, h *nsHarness) {
			require.NoError(t, h.eng.Del(context.Background(), req(h.conf, "old")))
		},
		"reclaim": func(t *testing.T, h *nsHarness) {
			_, err := h.eng.Reclaim(context.Background(), keyOf(h.conf, "old"), ReclaimOptions{Verb: "RECLAIM", Path: "/opt/cni/bin"})
			require.NoError(t, err)
		},
		"retry pass": func(t *testing.T, h *nsHarness) {
			h.clock.advance(retryBackoff(1))
			rep, err := h.eng.RetryPending(context.Background(), gcReq(h.conf), RetryOptions{Linger: -1})
			require.NoError(t, err)
			require.Equal(t, 1, rep.Released, "%+v", rep)
		},
		"GC": func(t *testing.T, h *nsHarness) {
			h.clock.advance(time.Hour)
			r := gcReq(h.conf)
			conf := *r.Conf
			conf.ValidAttachments = json.RawMessage(`[]`)
			r.Conf = &conf
			require.NoError(t, h.eng.GC(context.Background(), r))
		},
		"repair": func(t *testing.T, h *nsHarness) {
			_, err := h.eng.Repair(context.Background(), gcReq(h.conf), nil)
			require.NoError(t, err)
		},
		"repeated ADD": func(t *testing.T, h *nsHarness) {
			r := req(h.conf, "old")
			r.Args.NetNS = "/var/run/netns/elsewhere"
			h.ns.create(r.Args.NetNS)
			_, err := h.eng.Add(context.Background(), r)
			require.NoError(t, err)
		},
	}
	for name, healer := range heal {
		for _, replaced := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, replaced=%v", name, replaced), func(t *testing.T) {
				h := newNSHarness(t)
				h.add(t, "old")
				old := req(h.conf, "old")
				rec, err := h.store.Load(old.Key())
				require.NoError(t, err)
				require.NotNil(t, rec.NetNSID, "ADD records the namespace's identity")
				h.exec.set("portmap", behaviour{failDel: true})
				require.Error(t, h.eng.Del(context.Background(), old))
				if replaced {
					h.ns.reuseInode(old.Args.NetNS)
				}
				h.exec.set("portmap", behaviour{})
				h.exec.reset()
				var ops []Op
				h.eng.OnOp = func(op Op) { ops = append(ops, op) }

				healer(t, h)
				var dels []call
				for _, c := range h.exec.callsOf("DEL", "portmap") {
					if c.ContainerID == "old" {
						dels = append(dels, c)
					}
				}
				require.Len(t, dels, 1, "the old record is torn down once: %v", h.exec.seen())
				want := old.Args.NetNS
				var named []string
				for _, op := range ops {
					named = append(named, op.NetNSReplaced...)
				}
				var wantNamed []string
				if replaced {
					want, wantNamed = "", []string{old.Key().String()}
				}
				assert.Equal(t, want, dels[0].NetNS)
				assert.Equal(t, wantNamed, named, "the journal names the attachment torn down without its netns")
			})
		}
	}
}

// TestGCStaleNetNSReplaced: GC --stale-netns treats a path where another
// namespace now stands as stale, and keeps a record with no netns identity
// (adopted, or not identified at ADD) whose path exists, which it cannot judge.
func TestGCStaleNetNSReplaced(t *testing.T) {
	h := newNSHarness(t)
	for _, cid := range []string{"same", "replaced", "legacy"} {
		h.add(t, cid)
	}
	h.ns.reuseInode(req(h.conf, "replaced").Args.NetNS)
	legacy, err := h.store.Load(keyOf(h.conf, "legacy"))
	require.NoError(t, err)
	legacy.NetNSID = nil
	require.NoError(t, h.store.Save(legacy))
	h.clock.advance(time.Hour)
	h.exec.reset()

	rep, err := h.eng.CollectGarbage(context.Background(), gcReq(h.conf), GCOptions{StaleNetNS: true})
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{keyOf(h.conf, "replaced")}, rep.TornDown)
	assert.Equal(t, "", h.exec.callsOf("DEL", "ipam")[0].NetNS, "the new namespace is not entered")
	reasons := map[string]string{}
	for _, s := range rep.Skipped {
		reasons[s.Key.ContainerID] = s.Reason
	}
	assert.Contains(t, reasons["same"], "still exists")
	assert.Contains(t, reasons["legacy"], "no identity")
}
