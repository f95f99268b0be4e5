package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
)

// fakeLister answers ListPodSandbox from a set, or fails; hook, if set, runs
// at each call with the call's number (1-based) before the answer.
type fakeLister struct {
	mu    sync.Mutex
	ids   map[string]struct{}
	err   error
	calls int
	hook  func(call int)
}

var _ SandboxLister = (*fakeLister)(nil)

func (f *fakeLister) SandboxIDs(ctx context.Context) (map[string]struct{}, error) {
	f.mu.Lock()
	f.calls++
	n, hook := f.calls, f.hook
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return maps(f.ids), nil
}

func maps(in map[string]struct{}) map[string]struct{} {
	out := make(map[string]struct{}, len(in))
	for k := range in {
		out[k] = struct{}{}
	}
	return out
}

func (f *fakeLister) set(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = map[string]struct{}{}
	for _, id := range ids {
		f.ids[id] = struct{}{}
	}
}

// fakeExec records every delegate call and fails DEL of the types in fail.
type fakeExec struct {
	mu    sync.Mutex
	calls []libchain.Call
	fail  map[string]bool
}

var _ libchain.Executor = (*fakeExec)(nil)

func (f *fakeExec) Add(context.Context, libchain.Call) (types.Result, error) {
	return nil, errors.New("fakeExec: no ADD in these tests")
}

func (f *fakeExec) Run(_ context.Context, c libchain.Call) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	if f.fail[c.Type] {
		return fmt.Errorf("%s: DEL fault", c.Type)
	}
	return nil
}

func (f *fakeExec) setFail(types ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = map[string]bool{}
	for _, t := range types {
		f.fail[t] = true
	}
}

// dels returns "container:type" of every DEL so far.
func (f *fakeExec) dels() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.Verb == "DEL" {
			out = append(out, c.Args.ContainerID+":"+c.Type)
		}
	}
	return out
}

// world is one reconciler over an in-memory cache dir, with a fake runtime
// and fake delegates, and a clock the test moves.
type world struct {
	t     testing.TB
	fs    afero.Fs
	store *cache.DiskStore
	exec  *fakeExec
	rt    *fakeLister
	eng   *libchain.Engine
	ops   []events.Op
	clock time.Time
	bo    *MemBackoff
	opts  Options
	ns    *fakeNetNS
}

// fakeNetNS is the node's network namespaces as a test sets them: which
// namespace is at each netns path (a path not there is gone), which
// process is in each namespace, and whether every process could be seen.
type fakeNetNS struct {
	mu         sync.Mutex
	at         map[string]cache.NetNSIdentity
	in         map[cache.NetNSIdentity]string
	incomplete string
	scans      int
}

var _ NetNSObserver = (*fakeNetNS)(nil)

// Stat finds the namespace at path; /var/run/netns itself is there.
func (f *fakeNetNS) Stat(path string) (cache.NetNSIdentity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if path == "/var/run/netns" {
		return cache.NetNSIdentity{Dev: 30, Ino: 1}, nil
	}
	id, ok := f.at[path]
	if !ok {
		return cache.NetNSIdentity{}, fmt.Errorf("netns %s: %w", path, fs.ErrNotExist)
	}
	return id, nil
}

// Scan returns the processes set, and counts the looks.
func (f *fakeNetNS) Scan() (Processes, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scans++
	in := make(map[cache.NetNSIdentity]string, len(f.in))
	for id, who := range f.in {
		in[id] = who
	}
	return Processes{In: in, Incomplete: f.incomplete}, nil
}

// podLives puts the namespace of cid's ADD at its path, with a process in
// it: a pod whose sandbox runs, whatever the runtime lists.
func (w *world) podLives(cid string) {
	w.ns.mu.Lock()
	defer w.ns.mu.Unlock()
	id := netnsID(cid)
	w.ns.at["/var/run/netns/"+cid] = id
	w.ns.in[id] = "pid 4242 (pause)"
}

// netnsOnly puts the namespace of cid's ADD at its path, with no process
// in it: a sandbox whose pause process is gone, its bind mount left.
func (w *world) netnsOnly(cid string) {
	w.ns.mu.Lock()
	defer w.ns.mu.Unlock()
	w.ns.at["/var/run/netns/"+cid] = netnsID(cid)
}

// netnsReplaced puts another namespace than that of cid's ADD at its
// path, with no process in the namespace of the ADD: the path reused.
func (w *world) netnsReplaced(cid string) {
	w.ns.mu.Lock()
	defer w.ns.mu.Unlock()
	w.ns.at["/var/run/netns/"+cid] = netnsID(cid + "-next")
}

// netnsID is the identity of cid's namespace as its ADD recorded it.
func netnsID(cid string) cache.NetNSIdentity {
	h := fnv.New64a()
	_, _ = h.Write([]byte(cid))
	return cache.NetNSIdentity{Dev: 4, Ino: 4026531840 + h.Sum64()%1_000_000, ID: h.Sum64()}
}

const testGrace = 2 * time.Minute

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{t: t, fs: afero.NewMemMapFs(), exec: &fakeExec{}, rt: &fakeLister{},
		ns:    &fakeNetNS{at: map[string]cache.NetNSIdentity{}, in: map[cache.NetNSIdentity]string{}},
		clock: time.Now().Add(time.Hour), bo: &MemBackoff{Min: 10 * time.Second, Max: time.Minute}}
	w.store = cache.NewDiskStore(w.fs, "/cache", cache.NewMemLocker())
	w.eng = &libchain.Engine{Store: w.store, Exec: w.exec, Now: func() time.Time { return w.clock },
		StatNetNS: func(string) (cache.NetNSIdentity, error) {
			return cache.NetNSIdentity{}, errors.New("no netns in unit tests")
		},
		OnOp: func(op events.Op) { w.ops = append(w.ops, op) }}
	w.opts = Options{Grace: testGrace, CNIPath: "/opt/cni/bin"}
	return w
}

// reconciler returns a new Reconciler over w, as after an agent restart.
func (w *world) reconciler() *Reconciler {
	return &Reconciler{Store: w.store, Marks: cache.NewDiskMarks(w.fs, "/cache"), Runtime: w.rt, NetNS: w.ns, Engine: w.eng,
		Backoff: w.bo, Now: func() time.Time { return w.clock }, Opts: w.opts}
}

func (w *world) pass() *Report {
	w.t.Helper()
	rep, _ := w.reconciler().Pass(context.Background())
	return rep
}

func key(cid string) cache.Key { return cache.Key{Network: "podnet", ContainerID: cid, IfName: "eth0"} }

// add saves a complete record of a [a, b, c] chain for cid, made by a CRI
// runtime (infra=true) or not.
func (w *world) add(cid string, infra bool) *cache.Record {
	w.t.Helper()
	rec := record(cid, infra)
	require.NoError(w.t, w.store.Save(rec))
	return rec
}

func record(cid string, infra bool) *cache.Record {
	args := "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p-" + cid
	if infra {
		args += ";K8S_POD_INFRA_CONTAINER_ID=" + cid
	}
	rec := &cache.Record{Key: key(cid), Phase: cache.PhaseComplete, CNIVersion: "1.1.0", Args: args,
		NetNS: "/var/run/netns/" + cid, NetNSID: new(netnsID(cid)), Created: time.Now()}
	for i, typ := range []string{"a", "b", "c"} {
		rec.Steps = append(rec.Steps, cache.Step{Index: i, Type: typ, CNIVersion: "1.1.0", State: cache.StepAdded,
			Config: json.RawMessage(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"podnet","type":%q}`, typ))})
	}
	return rec
}

func (w *world) exists(cid string) bool {
	w.t.Helper()
	_, err := w.store.Load(key(cid))
	if errors.Is(err, cache.ErrNotFound) {
		return false
	}
	require.NoError(w.t, err)
	return true
}

func (w *world) marked(cid string) bool {
	w.t.Helper()
	m, err := cache.NewDiskMarks(w.fs, "/cache").Marks()
	require.NoError(w.t, err)
	_, ok := m[key(cid)]
	return ok
}

// actionOf is the decision of the report about cid ("" if none).
func actionOf(rep *Report, cid string) Action {
	i := slices.IndexFunc(rep.Decisions, func(d Decision) bool { return d.Key == key(cid) })
	if i < 0 {
		return ""
	}
	return rep.Decisions[i].Action
}

// afero_WriteFile overwrites a file of w's filesystem.
func afero_WriteFile(w *world, path string, data []byte) error {
	return afero.WriteFile(w.fs, path, data, 0o600)
}

var errNotExist = fs.ErrNotExist
