package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

const (
	soakOps         = 500
	soakAttachments = 50
	soakParallel    = 8
	soakFaultRate   = 0.15 // per operation, ADD and DEL faults each: ~10% of calls fail
	// soakSeedEnv replays a run: the seed is logged at the start.
	soakSeedEnv = "CATENA_SOAK_SEED"
)

type soakKind string

const (
	opAdd      soakKind = "ADD"
	opDel      soakKind = "DEL"
	opCheck    soakKind = "CHECK"
	opDelTwice soakKind = "DEL,DEL"
	opReAdd    soakKind = "DEL,ADD"
)

// soakOp is one planned operation: its attachment, what it does, and which
// faults are in force while it runs.
type soakOp struct {
	n                  int
	att                int
	kind               soakKind
	faultAdd, faultDel bool
}

// soakState is the model of an attachment, from the outcomes of its own
// operations.
type soakState string

const (
	stNone     soakState = "none"     // nothing held, no record
	stComplete soakState = "complete" // ADD succeeded
	stHeld     soakState = "held"     // a DEL of the failer failed: bridge and portmap still held
)

// soakAtt is one attachment: its netns, container, conflist and faults.
type soakAtt struct {
	rt                 *libcni.RuntimeConf
	list               *libcni.NetworkConfigList
	addFault, delFault string
	state              soakState
	stats              *soakStats // shared by all attachments
}

// soakStats counts calls and the injected failures they met.
type soakStats struct {
	calls, addFailures, delFailures atomic.Int32
}

// TestConcurrencySoak runs 500 seeded random operations (ADD, DEL, CHECK,
// DEL twice, ADD after DEL) over 50 attachments of the real chain
// [bridge + host-local, portmap, failer (DEL fault), tuning, failer (ADD
// fault)], 8 attachments at a time, with ~10% injected ADD failures and
// ~10% injected DEL failures (toggled per operation through fault files).
// Each outcome must match a model of the attachment. Before the final
// cleanup: no leaked IP, no duplicate IP, no leaked veth, and every record
// explains exactly what is still held. Then, faults lifted, DEL releases
// everything.
func TestConcurrencySoak(t *testing.T) {
	w := newWorld(t)
	const net = "itsoak"
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(soakSeedEnv); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, soakSeedEnv)
	}
	t.Logf("soak seed %d (replay with %s=%d)", seed, soakSeedEnv, seed)
	plan := soakPlan(seed)

	faults := t.TempDir()
	stats := &soakStats{}
	atts := make([]*soakAtt, soakAttachments)
	for i := range atts {
		a := &soakAtt{state: stNone, stats: stats,
			addFault: filepath.Join(faults, fmt.Sprintf("%d.add", i)),
			delFault: filepath.Join(faults, fmt.Sprintf("%d.del", i)),
		}
		cid := fmt.Sprintf("%s-s%d", w.id, i)
		a.rt = &libcni.RuntimeConf{ContainerID: cid, NetNS: w.addNetns(cid), IfName: "eth0",
			CapabilityArgs: portMapping(23000 + i)}
		a.list = w.timedList(net, "30s", "20s", w.bridgeDelegate(), portmapDelegate,
			failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, a.delFault)), tuningDelegate,
			failer(fmt.Sprintf(`"failAdd":true,"faultFile":%q`, a.addFault)))
		atts[i] = a
		w.delAtCleanup(a.list, a.rt)
		t.Cleanup(func() { // first (LIFO): lift the faults for that DEL
			assert.NoError(t, removeIfExists(a.addFault))
			assert.NoError(t, removeIfExists(a.delFault))
		})
	}

	// Each attachment's operations run in plan order; attachments run in
	// parallel, soakParallel at a time.
	byAtt := make([][]soakOp, soakAttachments)
	for _, op := range plan {
		byAtt[op.att] = append(byAtt[op.att], op)
	}
	start := time.Now()
	sem := make(chan struct{}, soakParallel)
	var wg sync.WaitGroup
	for i, ops := range byAtt {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for _, op := range ops {
				w.soakRun(t, seed, atts[i], op)
			}
		}()
	}
	wg.Wait()
	counts := map[soakState]int{}
	for _, a := range atts {
		counts[a.state]++
	}
	t.Logf("%d operations (%d calls) in %s; injected failures met: %d ADD, %d DEL; final states: %v",
		len(plan), stats.calls.Load(), time.Since(start).Round(time.Millisecond),
		stats.addFailures.Load(), stats.delFailures.Load(), counts)
	require.False(t, t.Failed(), "seed %d", seed)

	w.soakCheckHeld(t, net, atts)

	// Faults lifted, DEL releases everything.
	for _, a := range atts {
		require.NoError(t, removeIfExists(a.addFault))
		require.NoError(t, removeIfExists(a.delFault))
		require.NoError(t, w.cni.DelNetworkList(bg, a.list, a.rt), "final DEL of %s", a.rt.ContainerID)
	}
	assert.Empty(t, w.ipamFiles(net), "no leaked IP")
	assert.Empty(t, w.hostVeths(), "no leaked veth")
	assert.Empty(t, w.records(net))
	assert.Empty(t, w.lockFiles())
	save := run(t, "iptables-save")
	for _, a := range atts {
		assert.False(t, portmapRulesFor(save, a.rt.ContainerID), a.rt.ContainerID)
	}
	// The retriers the last DELs started find nothing left; the
	// network's retry stamp (.due), a hint, may stay.
	reapRetriers(t, w.cacheDir, 2*time.Minute)
	pending, err := filepath.Glob(filepath.Join(w.cacheDir, "pending", net, "[^.]*"))
	require.NoError(t, err)
	assert.Empty(t, pending, "no teardown left pending")
}

// soakPlan draws the operations from seed.
func soakPlan(seed uint64) []soakOp {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	kinds := []struct {
		kind   soakKind
		weight int
	}{{opAdd, 30}, {opDel, 20}, {opCheck, 15}, {opDelTwice, 15}, {opReAdd, 20}}
	plan := make([]soakOp, soakOps)
	for n := range plan {
		op := soakOp{n: n, att: rng.IntN(soakAttachments)}
		pick := rng.IntN(100)
		for _, k := range kinds {
			if pick < k.weight {
				op.kind = k.kind
				break
			}
			pick -= k.weight
		}
		// CHECK leaves the faults as they are: lifting the DEL fault of a
		// held attachment would let a background retrier release it
		// behind the model's back. (Any other operation's outcome is the
		// same whether or not a retrier released the record first.)
		if op.kind != opCheck {
			op.faultAdd = rng.Float64() < soakFaultRate
			op.faultDel = rng.Float64() < soakFaultRate
		}
		plan[n] = op
	}
	return plan
}

// soakRun sets the operation's faults (but for CHECK), runs it and checks each outcome
// against the model, which it then updates.
func (w *world) soakRun(t *testing.T, seed uint64, a *soakAtt, op soakOp) {
	where := fmt.Sprintf("seed %d op %d (%s on %s, faults add=%t del=%t, state %s)",
		seed, op.n, op.kind, a.rt.ContainerID, op.faultAdd, op.faultDel, a.state)
	// Not require: this runs outside the test's goroutine.
	if op.kind != opCheck && (!assert.NoError(t, setFault(a.addFault, op.faultAdd), where) ||
		!assert.NoError(t, setFault(a.delFault, op.faultDel), where)) {
		return
	}
	switch op.kind {
	case opAdd:
		w.soakAdd(t, a, op, where)
	case opDel:
		w.soakDel(t, a, op, where)
	case opDelTwice:
		w.soakDel(t, a, op, where)
		w.soakDel(t, a, op, where+" (second DEL)")
	case opReAdd:
		w.soakDel(t, a, op, where)
		w.soakAdd(t, a, op, where+" (ADD after DEL)")
	case opCheck:
		a.stats.calls.Add(1)
		err := w.cni.CheckNetworkList(bg, a.list, a.rt)
		if a.state == stComplete {
			assert.NoError(t, err, where)
		} else {
			assert.Equal(t, types.ErrUnknownContainer, cniCode(err), "%s: %v", where, err)
		}
	}
}

func (w *world) soakAdd(t *testing.T, a *soakAtt, op soakOp, where string) {
	a.stats.calls.Add(1)
	_, err := w.cni.AddNetworkList(bg, a.list, a.rt)
	switch {
	case a.state == stComplete:
		assert.Equal(t, types.ErrInvalidEnvironmentVariables, cniCode(err), "%s: %v", where, err)
		assert.ErrorContains(t, err, "already added", where)
	case a.state == stHeld && op.faultDel:
		a.stats.delFailures.Add(1)
		assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%s: %v", where, err)
		assert.ErrorContains(t, err, "an earlier attempt still holds resources", where)
	case op.faultAdd && op.faultDel:
		a.stats.addFailures.Add(1)
		a.stats.delFailures.Add(1)
		assert.ErrorContains(t, err, "delegate 4 (failer) ADD failed", where)
		assert.ErrorContains(t, err, "rollback incomplete", where)
		a.state = stHeld
	case op.faultAdd:
		a.stats.addFailures.Add(1)
		assert.ErrorContains(t, err, "delegate 4 (failer) ADD failed", where)
		assert.ErrorContains(t, err, "; rolled back", where)
		a.state = stNone
	default:
		assert.NoError(t, err, where)
		a.state = stComplete
	}
}

func (w *world) soakDel(t *testing.T, a *soakAtt, op soakOp, where string) {
	a.stats.calls.Add(1)
	err := w.cni.DelNetworkList(bg, a.list, a.rt)
	if a.state == stNone || !op.faultDel {
		assert.NoError(t, err, where)
		a.state = stNone
		return
	}
	a.stats.delFailures.Add(1)
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%s: %v", where, err)
	assert.ErrorContains(t, err, "delegate 2 (failer) DEL failed", where)
	assert.ErrorContains(t, err, "still held and recorded", where)
	a.state = stHeld
}

// soakCheckHeld compares, attachment by attachment, the model, the record
// and what the host really holds: IPs (host-local), interfaces (veths on
// the bridge, eth0 in the netns) and portmap's iptables rules.
func (w *world) soakCheckHeld(t *testing.T, net string, atts []*soakAtt) {
	owners := w.ipOwners(net)
	byOwner := map[string]string{}
	for ip, cid := range owners {
		prev, dup := byOwner[cid]
		assert.False(t, dup, "%s holds two IPs: %s and %s", cid, prev, ip)
		byOwner[cid] = ip
	}
	save := run(t, "iptables-save")
	inSandbox := map[string]string{}
	holding := 0
	for _, a := range atts {
		cid := a.rt.ContainerID
		rec := w.recordOf(net, cid)
		addrs := w.sandboxAddrsOf(a.rt.NetNS, "eth0")
		for _, addr := range addrs {
			prev, dup := inSandbox[addr]
			assert.False(t, dup, "duplicate IP %s in %s and %s", addr, prev, cid)
			inSandbox[addr] = cid
		}
		switch a.state {
		case stNone:
			assert.Nil(t, rec, "%s: a record, but nothing should be held", cid)
		case stComplete:
			require.NotNil(t, rec, "%s: complete but no record", cid)
			assert.Equal(t, "complete", rec["phase"], cid)
			assert.Equal(t, []string{"added", "added", "added", "added", "added"}, stepStates(rec), cid)
		case stHeld:
			require.NotNil(t, rec, "%s: held but no record", cid)
			assert.Equal(t, "needs-teardown", rec["phase"], cid)
			assert.Equal(t, []string{"added", "added", "del-failed", "deleted", "deleted"}, stepStates(rec), cid)
		}
		// The record, whatever the model says, explains exactly what the
		// host holds for this attachment.
		bridgeHeld := rec != nil && stepHeld(rec, 0)
		portmapHeld := rec != nil && stepHeld(rec, 1)
		if bridgeHeld {
			holding++
			ip, ok := byOwner[cid]
			assert.True(t, ok, "%s: the record holds the bridge step but host-local has no IP for it", cid)
			assert.Len(t, addrs, 1, cid)
			if len(addrs) == 1 {
				sandboxIP, _, _ := strings.Cut(addrs[0], "/")
				assert.Equal(t, ip, sandboxIP, "%s: host-local's IP is the one in the sandbox", cid)
			}
		} else {
			assert.NotContains(t, byOwner, cid, "%s: leaked IP", cid)
			assert.Empty(t, addrs, "%s: an interface no record explains", cid)
		}
		assert.Equal(t, portmapHeld, portmapRulesFor(save, cid), "%s: portmap rules vs record", cid)
	}
	assert.Len(t, owners, holding, "no leaked IP: every allocation belongs to a record that holds it")
	assert.Len(t, w.hostVeths(), holding, "no leaked veth")
	assert.Len(t, w.records(net), holding, "no record for nothing")
	assert.Empty(t, w.lockFiles(), "no lock file without an operation in flight")
}

// recordOf returns the attachment's record, or nil.
func (w *world) recordOf(net, cid string) map[string]any {
	path := filepath.Join(w.cacheDir, "records", net, cid+":eth0.json")
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil
	}
	return readRecord(w.t, path)
}

// stepHeld reports whether step i of a record read from disk holds
// resources, by the store's own rule.
func stepHeld(rec map[string]any, i int) bool {
	return cache.Step{State: cache.StepState(stepStates(rec)[i])}.Held()
}

func stepStates(rec map[string]any) []string {
	var out []string
	for _, s := range rec["steps"].([]any) {
		out = append(out, s.(map[string]any)["state"].(string))
	}
	return out
}

// setFault creates or removes a fault file.
func setFault(path string, on bool) error {
	if !on {
		return removeIfExists(path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
