package libchain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// fakeScanner is the node's processes as a test sets them: the namespaces
// a process is in, and whether the look is complete. It counts the scans.
type fakeScanner struct {
	mu         sync.Mutex
	in         map[cache.NetNSIdentity]string
	incomplete string
	err        error
	scans      int
}

var _ ProcessScanner = (*fakeScanner)(nil)

func (f *fakeScanner) Scan() (NetNSProcesses, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scans++
	in := make(map[cache.NetNSIdentity]string, len(f.in))
	for id, who := range f.in {
		in[id] = who
	}
	return NetNSProcesses{In: in, Incomplete: f.incomplete}, f.err
}

// aliveHarness is an nsHarness whose engine sees the fake processes and
// logs into a buffer.
func aliveHarness(t *testing.T) (*nsHarness, *fakeScanner, *bytes.Buffer) {
	t.Helper()
	h := newNSHarness(t)
	procs := &fakeScanner{in: map[cache.NetNSIdentity]string{}}
	h.eng.Procs = procs
	var buf bytes.Buffer
	h.eng.Log = slog.New(slog.NewTextHandler(&buf, nil))
	return h, procs, &buf
}

// idOf is the namespace identity recorded at the ADD of cid.
func (h *nsHarness) idOf(t *testing.T, cid string) cache.NetNSIdentity {
	t.Helper()
	rec, err := h.store.Load(keyOf(h.conf, cid))
	require.NoError(t, err)
	require.NotNil(t, rec.NetNSID)
	return *rec.NetNSID
}

// TestGCKeepsARecordWhoseNetNSHoldsAProcess: a runtime's list comes from
// its own state; a sandbox it forgot still runs. A GC with null or [] keeps
// the record whose ADD's namespace holds a process, says why, logs it once
// and tells the delegates it is valid; it tears down the record whose
// netns path is gone and whose namespace holds no process.
func TestGCKeepsARecordWhoseNetNSHoldsAProcess(t *testing.T) {
	for _, valid := range []string{"null", "[]"} {
		t.Run(valid, func(t *testing.T) {
			h, procs, logs := aliveHarness(t)
			h.add(t, "running")
			h.add(t, "stopped")
			h.ns.remove("/var/run/netns/stopped") // its sandbox is gone
			procs.in[h.idOf(t, "running")] = "pid 42 (pause)"
			h.clock.advance(time.Hour)
			h.exec.reset()

			require.NoError(t, h.eng.GC(context.Background(), gcReq(confWithValid(t, valid))))
			assert.Equal(t, []string{"DEL portmap", "DEL ipam", "GC ipam", "GC portmap"}, h.exec.seen())
			assert.Equal(t, "stopped", h.exec.callsOf("DEL", "ipam")[0].ContainerID)
			_, err := h.store.Load(keyOf(h.conf, "stopped"))
			require.ErrorIs(t, err, cache.ErrNotFound)
			rec, err := h.store.Load(keyOf(h.conf, "running"))
			require.NoError(t, err)
			assert.Equal(t, cache.PhaseComplete, rec.Phase)
			va := h.exec.callsOf("GC", "ipam")[0].Config["cni.dev/valid-attachments"]
			assert.Equal(t, []any{map[string]any{"containerID": "running", "ifname": "eth0"}}, va,
				"the delegates must not reclaim what the running sandbox holds")
			const why = "netns /var/run/netns/running still holds a process (pid 42 (pause))"
			warned := 0
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, why) {
					warned++
				}
			}
			assert.Equal(t, 1, warned, "warned once: %s", logs)
			assert.Equal(t, 1, procs.scans, "one scan per GC")

			rep, err := h.eng.CollectGarbage(context.Background(), gcReq(h.conf), GCOptions{Valid: []Attachment{}, DryRun: true})
			require.NoError(t, err)
			assert.Empty(t, rep.WouldTearDown)
			assert.Equal(t, []GCSkip{{Key: keyOf(h.conf, "running"), Reason: why}}, rep.Skipped)
		})
	}
}

// TestGCProcessGuard: what keeps a record that GC would tear down because
// the runtime does not list it, and what does not.
func TestGCProcessGuard(t *testing.T) {
	const path = "/var/run/netns/c1"
	for _, tc := range []struct {
		name string
		// set runs after the ADD of c1, before GC.
		set      func(t *testing.T, h *nsHarness, p *fakeScanner)
		noID     bool // the ADD could not identify the netns
		wantKept string
	}{
		{name: "a process in the ADD's namespace", set: func(t *testing.T, h *nsHarness, p *fakeScanner) {
			p.in[h.idOf(t, "c1")] = "pid 42 (pause)"
		}, wantKept: "netns " + path + " still holds a process (pid 42 (pause))"},
		{name: "the path gone, a process still in the ADD's namespace", set: func(t *testing.T, h *nsHarness, p *fakeScanner) {
			p.in[h.idOf(t, "c1")] = "pid 42 (pause)"
			h.ns.remove(path)
		}, wantKept: "still holds a process (pid 42 (pause))"},
		{name: "a process in another namespace at the path", set: func(t *testing.T, h *nsHarness, p *fakeScanner) {
			h.ns.reuseInode(path)
			id, err := h.ns.stat(path)
			require.NoError(t, err)
			p.in[id] = "pid 43 (pause)"
		}},
		{name: "no process, the path still the ADD's namespace", set: func(*testing.T, *nsHarness, *fakeScanner) {},
			wantKept: "the runtime listed no attachment, and netns " + path + " still exists"},
		{name: "no process, the path gone", set: func(_ *testing.T, h *nsHarness, _ *fakeScanner) { h.ns.remove(path) }},
		{name: "scan incomplete, the path still the ADD's namespace", set: func(_ *testing.T, _ *nsHarness, p *fakeScanner) {
			p.incomplete = "not in the host's PID namespace"
		}, wantKept: "whether a process is in it is unknown (not in the host's PID namespace)"},
		{name: "scan failed, the path still the ADD's namespace", set: func(_ *testing.T, _ *nsHarness, p *fakeScanner) {
			p.err = errors.New("/proc cannot be read")
		}, wantKept: "whether a process is in it is unknown (/proc cannot be read)"},
		{name: "scan incomplete, the path gone", set: func(_ *testing.T, h *nsHarness, p *fakeScanner) {
			p.incomplete = "not in the host's PID namespace"
			h.ns.remove(path)
		}},
		{name: "scan incomplete, another namespace at the path", set: func(_ *testing.T, h *nsHarness, p *fakeScanner) {
			p.incomplete = "not in the host's PID namespace"
			h.ns.reuseInode(path)
		}},
		{name: "no identity recorded, the path exists", noID: true, set: func(_ *testing.T, h *nsHarness, _ *fakeScanner) {
			h.ns.create(path)
		}, wantKept: "has no identity to tell whether it is the same namespace: kept while its netns exists"},
		{name: "no identity recorded, the path gone", noID: true, set: func(*testing.T, *nsHarness, *fakeScanner) {}},
		{name: "needs teardown: its teardown was decided, whatever runs", set: func(t *testing.T, h *nsHarness, p *fakeScanner) {
			p.in[h.idOf(t, "c1")] = "pid 42 (pause)"
			h.exec.set("portmap", behaviour{failDel: true})
			require.Error(t, h.eng.Del(context.Background(), req(h.conf, "c1")))
			h.exec.set("portmap", behaviour{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, procs, _ := aliveHarness(t)
			if tc.noID {
				h.ns.errs[path] = errors.New("permission denied")
				_, err := h.eng.Add(context.Background(), req(h.conf, "c1"))
				require.NoError(t, err)
				delete(h.ns.errs, path)
			} else {
				h.add(t, "c1")
			}
			tc.set(t, h, procs)
			h.clock.advance(time.Hour)
			rep, err := h.eng.CollectGarbage(context.Background(), gcReq(h.conf), GCOptions{Valid: []Attachment{}})
			require.NoError(t, err)
			if tc.wantKept == "" {
				assert.Equal(t, []cache.Key{keyOf(h.conf, "c1")}, rep.TornDown)
				assert.Empty(t, rep.Skipped)
				return
			}
			assert.Empty(t, rep.TornDown)
			require.Len(t, rep.Skipped, 1)
			assert.Contains(t, rep.Skipped[0].Reason, tc.wantKept)
			assert.Equal(t, []Attachment{{ContainerID: "c1", IfName: "eth0"}}, rep.KeptAlive)
		})
	}
}

// TestGCScansOnlyWhenARecordWouldGo: a GC scans the node's processes at
// most once, and not at all when no record would be torn down for the
// runtime's list (a fresh start, or every record listed).
func TestGCScansOnlyWhenARecordWouldGo(t *testing.T) {
	h, procs, _ := aliveHarness(t)
	_, err := h.eng.CollectGarbage(context.Background(), gcReq(h.conf), GCOptions{Valid: []Attachment{}})
	require.NoError(t, err)
	assert.Zero(t, procs.scans, "no records")

	h.add(t, "a")
	h.add(t, "b")
	h.clock.advance(time.Hour)
	both := []Attachment{{ContainerID: "a", IfName: "eth0"}, {ContainerID: "b", IfName: "eth0"}}
	_, err = h.eng.CollectGarbage(context.Background(), gcReq(h.conf), GCOptions{Valid: both})
	require.NoError(t, err)
	assert.Zero(t, procs.scans, "every record listed")

	h.ns.remove("/var/run/netns/a")
	h.ns.remove("/var/run/netns/b")
	rep, err := h.eng.CollectGarbage(context.Background(), gcReq(h.conf), GCOptions{Valid: []Attachment{}})
	require.NoError(t, err)
	assert.Len(t, rep.TornDown, 2)
	assert.Equal(t, 1, procs.scans, "two records, one scan")
}

// TestGCStaleNetNSKeepsARecordWhoseNamespaceHoldsAProcess: catenactl gc
// --stale-netns reads a gone path as a gone sandbox, unless a process is
// still in the namespace of the ADD.
func TestGCStaleNetNSKeepsARecordWhoseNamespaceHoldsAProcess(t *testing.T) {
	h, procs, _ := aliveHarness(t)
	h.add(t, "held")
	h.add(t, "gone")
	procs.in[h.idOf(t, "held")] = "pid 42 (pause)"
	h.ns.remove("/var/run/netns/held")
	h.ns.remove("/var/run/netns/gone")
	h.clock.advance(time.Hour)
	rep, err := h.eng.CollectGarbage(context.Background(), gcReq(h.conf), GCOptions{StaleNetNS: true})
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{keyOf(h.conf, "gone")}, rep.TornDown)
	require.Len(t, rep.Skipped, 1)
	assert.Equal(t, "netns /var/run/netns/held still holds a process (pid 42 (pause))", rep.Skipped[0].Reason)
}

// TestGCEmptyListProof: under a valid list that is null or [] (a runtime
// that forgot its sandboxes, or the wrong one), GC tears a record down only
// on proof that its sandbox is gone: its netns path gone, or another
// namespace there. A namespace still pinned at its path with no process in
// it (CRI-O's drop_infra_ctr pod between two restarts of its containers), a
// path that cannot be read and a record with no netns are kept, whether
// processes are scanned or not. While the runtime lists other attachments,
// its list decides for them.
func TestGCEmptyListProof(t *testing.T) {
	const path = "/var/run/netns/c1"
	const kept = "the runtime listed no attachment, and "
	other := []Attachment{{ContainerID: "other", IfName: "eth0"}}
	for _, tc := range []struct {
		name string
		// set runs after the ADD of c1, before GC.
		set       func(h *nsHarness)
		noScanner bool
		// wantKept is why c1 is kept under null and [] ("": torn down).
		wantKept string
	}{
		{name: "pinned, no process", set: func(*nsHarness) {}, wantKept: kept + "netns " + path + " still exists"},
		{name: "pinned, no scanner", noScanner: true, set: func(*nsHarness) {}, wantKept: kept + "netns " + path + " still exists"},
		{name: "unreadable", set: func(h *nsHarness) { h.ns.errs[path] = errors.New("permission denied") },
			wantKept: kept + "netns " + path + " cannot be read: permission denied"},
		{name: "no netns recorded", set: func(h *nsHarness) {
			rec, err := h.store.Load(keyOf(h.conf, "c1"))
			require.NoError(t, err)
			rec.NetNS, rec.NetNSID = "", nil
			require.NoError(t, h.store.Save(rec))
		}, wantKept: kept + "no netns is recorded to prove its sandbox gone"},
		{name: "path gone", set: func(h *nsHarness) { h.ns.remove(path) }},
		{name: "path gone, no scanner", noScanner: true, set: func(h *nsHarness) { h.ns.remove(path) }},
		{name: "another namespace at the path", set: func(h *nsHarness) { h.ns.reuseInode(path) }},
	} {
		for _, valid := range []string{"null", "[]", "others"} {
			t.Run(tc.name+", "+valid, func(t *testing.T) {
				h, _, _ := aliveHarness(t)
				if tc.noScanner {
					h.eng.Procs = nil
				}
				h.add(t, "c1")
				tc.set(h)
				h.clock.advance(time.Hour)
				opts := GCOptions{Valid: []Attachment{}}
				if valid == "others" {
					opts.Valid = other
				} else {
					list, err := parseValid(json.RawMessage(valid), nil)
					require.NoError(t, err)
					opts.Valid = list
				}
				rep, err := h.eng.CollectGarbage(context.Background(), gcReq(h.conf), opts)
				require.NoError(t, err)
				if tc.wantKept == "" || valid == "others" {
					assert.Equal(t, []cache.Key{keyOf(h.conf, "c1")}, rep.TornDown, "%+v", rep.Skipped)
					assert.Empty(t, rep.Skipped)
					return
				}
				assert.Empty(t, rep.TornDown)
				require.Len(t, rep.Skipped, 1)
				assert.Contains(t, rep.Skipped[0].Reason, tc.wantKept)
				assert.Contains(t, rep.Skipped[0].Reason, "only a netns path gone or holding another namespace proves its sandbox gone")
				assert.Equal(t, []Attachment{{ContainerID: "c1", IfName: "eth0"}}, rep.KeptAlive, "the delegates are told it is valid")
				_, err = h.store.Load(keyOf(h.conf, "c1"))
				require.NoError(t, err)
			})
		}
	}
}
