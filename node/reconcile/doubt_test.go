package reconcile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// decisionOf is the report's decision about cid.
func decisionOf(t *testing.T, rep *Report, cid string) Decision {
	t.Helper()
	for _, d := range rep.Decisions {
		if d.Key == key(cid) {
			return d
		}
	}
	t.Fatalf("no decision about %s in %+v", cid, rep.Decisions)
	return Decision{}
}

// TestEmptyListIsDoubt: a runtime that answers ListPodSandbox with an empty
// list (a wrong --runtime-endpoint, a runtime that has not restored its
// state yet) while in-scope records exist proves nothing: over passes
// spanning several grace periods, 5 records are never marked or reclaimed
// on the strength of that list alone, and each decision says why. Only a
// record whose netns proves it gone (its path gone, or another namespace
// there) is reclaimed; a namespace still pinned at its path with no process
// in it is no proof (CRI-O's drop_infra_ctr pod between two restarts of its
// containers): kept, with its mark. A record whose namespace still has a
// process in it is alive whatever the list says (its mark is cleared),
// empty list or not.
func TestEmptyListIsDoubt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// listed is what the runtime lists (none of the records)
		listed []string
		setup  func(w *world, cid string)
		// want is the decision of every pass; reclaimed, whether the
		// records are reclaimed in the end
		want      Action
		reason    []string
		reclaimed bool
		marked    bool // the earlier mark is kept
	}{
		{"empty list, pods alive (a process in the netns of their ADD)", nil, func(w *world, cid string) { w.podLives(cid) },
			ActAlive, []string{"pid 4242 (pause) is in the netns of its ADD"}, false, false},
		{"empty list, records without a netns identity (adopted, or not identified at ADD)", nil, func(w *world, cid string) {
			rec := mustLoad(w.t.(*testing.T), w, cid)
			rec.NetNSID = nil
			require.NoError(w.t, w.store.Save(rec))
		}, ActKept, []string{"runtime listed no sandboxes", "no netns identity"}, false, true},
		{"other sandboxes listed, no netns identity, a process in the netns at its path", []string{"other"}, func(w *world, cid string) {
			rec := mustLoad(w.t.(*testing.T), w, cid)
			rec.NetNSID = nil
			require.NoError(w.t, w.store.Save(rec))
			w.podLives(cid)
		}, ActAlive, []string{"pid 4242 (pause) is in netns /var/run/netns/%s"}, false, false},
		{"empty list, no netns recorded", nil, func(w *world, cid string) {
			rec := mustLoad(w.t.(*testing.T), w, cid)
			rec.NetNS, rec.NetNSID = "", nil
			require.NoError(w.t, w.store.Save(rec))
		}, ActKept, []string{"runtime listed no sandboxes", "no netns recorded"}, false, true},
		{"empty list, not every process seen, netns still that of the ADD", nil, func(w *world, cid string) {
			w.netnsOnly(cid)
			w.ns.incomplete = "not in the host's PID namespace"
		}, ActAlive, []string{"netns /var/run/netns/" + "%s is still that of its ADD", "not in the host's PID namespace"}, false, false},
		{"other sandboxes listed, pods alive", []string{"other"}, func(w *world, cid string) { w.podLives(cid) },
			ActAlive, []string{"pid 4242 (pause) is in the netns of its ADD"}, false, false},
		{"empty list, netns gone", nil, func(*world, string) {},
			ActReclaimed, []string{"netns /var/run/netns/%s is gone"}, true, false},
		{"empty list, netns pinned with no process in it (CRI-O's drop_infra_ctr between restarts)", nil, func(w *world, cid string) { w.netnsOnly(cid) },
			ActKept, []string{"runtime listed no sandboxes", "still that of its ADD, and no process is in it"}, false, true},
		{"empty list, another namespace at the netns path", nil, func(w *world, cid string) { w.netnsReplaced(cid) },
			ActReclaimed, []string{"netns /var/run/netns/%s is now another namespace"}, true, false},
		{"other sandboxes listed, netns pinned with no process in it: the list decides", []string{"other"}, func(w *world, cid string) { w.netnsOnly(cid) },
			ActReclaimed, nil, true, false},
		{"other sandboxes listed, no netns identity: the list decides", []string{"other"}, func(w *world, cid string) {
			rec := mustLoad(w.t.(*testing.T), w, cid)
			rec.NetNSID = nil
			require.NoError(w.t, w.store.Save(rec))
		}, ActReclaimed, nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.rt.set(tc.listed...)
			var cids []string
			for i := range 5 {
				cid := fmt.Sprintf("pod%d", i)
				cids = append(cids, cid)
				w.add(cid, true)
				tc.setup(w, cid)
			}
			// a mark from an earlier pass
			require.NoError(t, cache.NewDiskMarks(w.fs, "/cache").PutMark(cache.Mark{Key: key("pod0"), MarkedAt: w.clock.Add(-time.Hour), Version: Version(mustLoad(t, w, "pod0"))}))
			var reclaimed, marked, candidates int
			var last *Report
			reclaimReason := map[string]string{}
			for range 4 {
				last = w.pass()
				for _, d := range last.Decisions {
					if d.Action == ActReclaimed {
						reclaimReason[d.Key.ContainerID] = d.Reason
					}
				}
				reclaimed += last.Reclaimed
				marked += last.Marked
				candidates += last.Candidates
				w.clock = w.clock.Add(testGrace)
			}
			if !tc.reclaimed {
				assert.Zero(t, candidates, "no candidate")
				assert.Zero(t, marked, "no mark")
				assert.Zero(t, reclaimed, "nothing reclaimed")
				assert.Empty(t, w.exec.dels(), "no DEL")
				for _, cid := range cids {
					assert.True(t, w.exists(cid), cid)
					d := decisionOf(t, last, cid)
					assert.Equal(t, tc.want, d.Action, "%s: %s", cid, d.Reason)
					for _, r := range tc.reason {
						assert.Contains(t, d.Reason, expand(r, cid), cid)
					}
				}
				assert.Equal(t, tc.marked, w.marked("pod0"), "the earlier mark")
				return
			}
			assert.Equal(t, 5, reclaimed)
			for _, cid := range cids {
				assert.False(t, w.exists(cid), cid)
				for _, r := range tc.reason {
					assert.Contains(t, reclaimReason[cid], expand(r, cid), cid)
				}
			}
			assert.Len(t, w.exec.dels(), 15)
		})
	}
}

// expand puts cid into a reason that names it (%s).
func expand(reason, cid string) string {
	if strings.Contains(reason, "%s") {
		return fmt.Sprintf(reason, cid)
	}
	return reason
}

// TestPhaseTwoDoubt: phase two judges afresh. A marked record that the
// fresh ListPodSandbox lacks is still not reclaimed if that list is empty
// and nothing proves its sandbox gone (kept, its mark kept), or if its
// netns now shows its sandbox alive (left, its mark cleared).
func TestPhaseTwoDoubt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// noIdentity: x's record has no netns identity
		noIdentity bool
		atFresh    func(w *world)
		want       Action
		reason     string
		marked     bool
	}{
		{"fresh list empty, no proof", true, func(w *world) { w.rt.set() }, ActKept, "the runtime listed no sandboxes, and nothing proves its sandbox gone", true},
		{"a process entered its netns", false, func(w *world) { w.podLives("x") }, ActLeft, "pid 4242 (pause) is in the netns of its ADD", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.rt.set("other")
			w.add("x", true)
			if tc.noIdentity {
				rec := mustLoad(t, w, "x")
				rec.NetNSID = nil
				require.NoError(t, w.store.Save(rec))
			}
			w.clock = w.clock.Add(testGrace)
			require.Equal(t, ActMarked, actionOf(w.pass(), "x"))
			w.clock = w.clock.Add(testGrace)
			w.rt.hook = func(call int) {
				if call == 3 {
					tc.atFresh(w)
				}
			}
			scans := w.ns.scans
			rep := w.pass()
			d := decisionOf(t, rep, "x")
			assert.Equal(t, tc.want, d.Action, d.Reason)
			assert.Contains(t, d.Reason, tc.reason)
			assert.Zero(t, rep.Reclaimed)
			assert.True(t, w.exists("x"))
			assert.Equal(t, tc.marked, w.marked("x"))
			assert.Empty(t, w.exec.dels())
			if !tc.noIdentity {
				assert.Equal(t, 2, w.ns.scans-scans, "one look at the processes per phase")
			}
		})
	}
}

// TestJudge: what a record's netns proves, on every branch.
func TestJudge(t *testing.T) {
	id := netnsID("x")
	other := netnsID("y")
	for _, tc := range []struct {
		name       string
		at         map[string]cache.NetNSIdentity
		in         map[cache.NetNSIdentity]string
		incomplete string
		noIdentity bool
		want       Verdict
		why        string
	}{
		{"a process in it, its file gone", nil, map[cache.NetNSIdentity]string{id: "pid 7 (pause)"}, "", false, NSAlive, "pid 7 (pause) is in the netns of its ADD"},
		{"same file, no process", map[string]cache.NetNSIdentity{"/var/run/netns/x": id}, nil, "", false, NSIdle, "still that of its ADD, and no process is in it"},
		{"same file, processes not all seen", map[string]cache.NetNSIdentity{"/var/run/netns/x": id}, nil, "no hostPID", false, NSAlive, "whether a process is in it is unknown: no hostPID"},
		{"another namespace at the path", map[string]cache.NetNSIdentity{"/var/run/netns/x": other}, map[cache.NetNSIdentity]string{other: "pid 8 (pause)"}, "", false, NSDead, "now another namespace, and no process is in that of its ADD"},
		{"another namespace, processes not all seen", map[string]cache.NetNSIdentity{"/var/run/netns/x": other}, nil, "no hostPID", false, NSDead, "now another namespace"},
		{"gone, no process", nil, nil, "", false, NSDead, "is gone, and no process is in the namespace of its ADD"},
		{"gone, processes not all seen", nil, nil, "no hostPID", false, NSDead, "netns /var/run/netns/x is gone"},
		{"no identity, file and process", map[string]cache.NetNSIdentity{"/var/run/netns/x": id}, map[cache.NetNSIdentity]string{id: "pid 7 (pause)"}, "", true, NSAlive, "has no netns identity to tell"},
		{"no identity, gone", nil, nil, "", true, NSUnknown, "no netns identity to prove its namespace gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeNetNS{at: tc.at, in: tc.in, incomplete: tc.incomplete}
			rec := record("x", true)
			if tc.noIdentity {
				rec.NetNSID = nil
			}
			procs, err := f.Scan()
			require.NoError(t, err)
			ev := judge(f, procs, rec)
			assert.Equal(t, tc.want, ev.Verdict, ev.Why)
			assert.Contains(t, ev.Why, tc.why)
		})
	}
	// processes not all seen, and the netns dir itself missing: no proof
	rec := record("x", true)
	rec.NetNS = "/run/elsewhere/x"
	ev := judge(&fakeNetNS{incomplete: "no hostPID"}, Processes{Incomplete: "no hostPID"}, rec)
	assert.Equal(t, NSUnknown, ev.Verdict, ev.Why)
	assert.Contains(t, ev.Why, "nor is its directory")
}
