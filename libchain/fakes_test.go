package libchain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/invoke"
	"github.com/catena-cni/catena/libchain/tracectx"
)

// behaviour tells the fake executor how one delegate type answers.
type behaviour struct {
	failAdd, failDel, failCheck, failStatus bool
	failGC                                  bool
	hangAdd                                 bool // block until the ctx ends
	code                                    uint // error code, default 100
	exit                                    int  // exit status a failure carries (invoke.ExitError); 0 for none
}

// call is what the fake executor saw.
type call struct {
	Verb, Type, NetNS string
	ContainerID       string
	Config            map[string]any
	Stdin             []byte // Config as the delegate got it
	Trace             tracectx.Context
}

func (c call) prevResult() map[string]any {
	p, _ := c.Config["prevResult"].(map[string]any)
	return p
}

// fakeExec is an Executor whose delegates are in-memory. A delegate named
// "ipam" hands out 10.0.0.<n>/24 (10.0.0.1/24 every time with oneAddress:
// a range of one address, reused once freed); every other delegate returns
// its prevResult, as a chained plugin does.
type fakeExec struct {
	mu         sync.Mutex
	calls      []call
	by         map[string]behaviour
	next       int
	oneAddress bool
}

var _ Executor = (*fakeExec)(nil)

func newFakeExec() *fakeExec { return &fakeExec{by: map[string]behaviour{}} }

func (f *fakeExec) set(typ string, b behaviour) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.by[typ] = b
}

func (f *fakeExec) record(c Call) (call, behaviour, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var conf map[string]any
	if err := json.Unmarshal(c.Config, &conf); err != nil {
		return call{}, behaviour{}, fmt.Errorf("fake: bad stdin: %w", err)
	}
	cl := call{Verb: c.Verb, Type: c.Type, NetNS: c.Args.NetNS, ContainerID: c.Args.ContainerID, Config: conf, Stdin: bytes.Clone(c.Config), Trace: c.Trace}
	f.calls = append(f.calls, cl)
	return cl, f.by[c.Type], nil
}

func (b behaviour) err(verb, typ string) error {
	code := b.code
	if code == 0 {
		code = 100
	}
	te := types.NewError(code, fmt.Sprintf("%s %s failed on purpose", typ, verb), "")
	if b.exit != 0 {
		return &invoke.ExitError{Err: te, Status: b.exit}
	}
	return te
}

func (f *fakeExec) Add(ctx context.Context, c Call) (types.Result, error) {
	if err := invoke.AwaitStdinGate(ctx); err != nil {
		return nil, fmt.Errorf("fake: no request on stdin: %w", err) // as a real plugin would see EOF
	}
	cl, b, err := f.record(c)
	if err != nil {
		return nil, err
	}
	if b.hangAdd {
		<-ctx.Done()
		return nil, fmt.Errorf("killed: %w", ctx.Err())
	}
	if b.failAdd {
		return nil, b.err("ADD", c.Type)
	}
	ver, _ := cl.Config["cniVersion"].(string)
	if prev := cl.prevResult(); prev != nil && c.Type != "ipam" {
		raw, _ := json.Marshal(prev)
		return create.Create(ver, raw)
	}
	f.mu.Lock()
	f.next++
	n := f.next
	if f.oneAddress {
		n = 1
	}
	f.mu.Unlock()
	r := &current.Result{CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: c.Args.IfName, Sandbox: c.Args.NetNS}},
		IPs: []*current.IPConfig{{Interface: current.Int(0),
			Address: net.IPNet{IP: net.IPv4(10, 0, 0, byte(n)), Mask: net.CIDRMask(24, 32)}}}}
	return r.GetAsVersion(ver)
}

func (f *fakeExec) Run(ctx context.Context, c Call) error {
	_, b, err := f.record(c)
	if err != nil {
		return err
	}
	switch {
	case c.Verb == "DEL" && b.failDel, c.Verb == "CHECK" && b.failCheck, c.Verb == "GC" && b.failGC:
		return b.err(c.Verb, c.Type)
	case c.Verb == "STATUS" && b.failStatus:
		return types.NewError(types.ErrPluginNotAvailable, c.Type+" is not ready", "")
	}
	return nil
}

// seen lists "VERB type" for every call, in order.
func (f *fakeExec) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.calls))
	for _, c := range f.calls {
		out = append(out, c.Verb+" "+c.Type)
	}
	return out
}

func (f *fakeExec) callsOf(verb, typ string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.Verb == verb && c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeExec) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// memStore is an in-memory cache.Store. It keeps records as encoded JSON so
// that tests see exactly what was saved, counts durable writes, and can be
// told to fail saves.
type memStore struct {
	mu       sync.Mutex
	recs     map[cache.Key][]byte
	corrupt  map[cache.Key]bool
	held     map[cache.Key]cache.Holder
	saves    int
	removes  int
	failSave func(n int) error // n: 1-based number of the save
	moved    []cache.Key
	tombs    map[cache.Key]cache.Tombstone
	failBury error
}

var (
	_ cache.Store      = (*memStore)(nil)
	_ cache.Tombstones = (*memStore)(nil)
)

func newMemStore() *memStore {
	return &memStore{recs: map[cache.Key][]byte{}, corrupt: map[cache.Key]bool{}, held: map[cache.Key]cache.Holder{},
		tombs: map[cache.Key]cache.Tombstone{}}
}

func (s *memStore) Bury(t cache.Tombstone) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failBury != nil {
		return s.failBury
	}
	s.tombs[t.Key] = t
	return nil
}

func (s *memStore) TombstoneOf(key cache.Key) (*cache.Tombstone, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tombs[key]
	if !ok {
		return nil, cache.ErrNotFound
	}
	return &t, nil
}

func (s *memStore) Unbury(key cache.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tombs, key)
	return nil
}

func (s *memStore) PruneTombstones(network string, now time.Time, maxAge time.Duration, _ int) ([]cache.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pruned []cache.Key
	for k, t := range s.tombs {
		if k.Network == network && t.Released.Before(now.Add(-maxAge)) {
			delete(s.tombs, k)
			pruned = append(pruned, k)
		}
	}
	return pruned, nil
}

type memUnlock struct {
	s   *memStore
	key cache.Key
}

func (u memUnlock) Unlock() error {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	delete(u.s.held, u.key)
	return nil
}

func (s *memStore) TryLock(key cache.Key, who cache.Holder) (cache.Unlocker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.held[key]; ok {
		return nil, &cache.LockedError{Key: key, Holder: &h}
	}
	s.held[key] = who
	return memUnlock{s, key}, nil
}

func (s *memStore) Lock(ctx context.Context, key cache.Key, who cache.Holder) (cache.Unlocker, error) {
	start := time.Now()
	for {
		u, err := s.TryLock(key, who)
		if err == nil {
			return u, nil
		}
		select {
		case <-ctx.Done():
			var le *cache.LockedError
			errors.As(err, &le)
			le.Waited = time.Since(start)
			return nil, le
		case <-time.After(time.Millisecond):
		}
	}
}

func (s *memStore) Load(key cache.Key) (*cache.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.corrupt[key] {
		return nil, fmt.Errorf("record %s: checksum mismatch: %w", key, cache.ErrCorrupt)
	}
	raw, ok := s.recs[key]
	if !ok {
		return nil, cache.ErrNotFound
	}
	var r cache.Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", cache.ErrCorrupt, err)
	}
	return &r, nil
}

func (s *memStore) Save(rec *cache.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves++
	if s.failSave != nil {
		if err := s.failSave(s.saves); err != nil {
			return err
		}
	}
	rec.Schema = cache.SchemaVersion
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	s.recs[rec.Key] = raw
	return nil
}

func (s *memStore) Remove(key cache.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removes++
	delete(s.recs, key)
	delete(s.corrupt, key)
	return nil
}

func (s *memStore) Quarantine(key cache.Key) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moved = append(s.moved, key)
	delete(s.recs, key)
	delete(s.corrupt, key)
	return "quarantine/" + key.ContainerID, nil
}

func (s *memStore) List() ([]cache.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []cache.Key
	for k := range s.recs {
		out = append(out, k)
	}
	return out, nil
}

// SweepTemps: a memStore writes atomically and leaves no temp files.
func (s *memStore) SweepTemps(string, time.Time) ([]string, error) { return nil, nil }

func (s *memStore) counts() (saves, removes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves, s.removes
}

// diskStore is the real store catena runs on: records on the disk under
// dir, with their fsyncs, and flock locks in its locks dir.
func diskStore(dir string) *cache.DiskStore {
	return cache.NewDiskStore(afero.NewOsFs(), dir, cache.NewFlockLocker(filepath.Join(dir, cache.LocksDir)))
}
