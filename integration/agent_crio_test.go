package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentCRIOInstallAdopts is the agent's install on a CRI-O node: two
// sandboxes run through the plain primary [bridge + host-local]; `run`
// (its reconciler listing CRI-O every 500 ms, grace 2 s) adopts both from
// CRI-O's libcni cache (/var/lib/cni/results, the agent's default
// --results-dir) and writes the generated conflist, which CRI-O (ocicni:
// files in name order, the first of a network name kept) takes for the
// primary's network in place of the primary's file. A new sandbox's ADD
// and DEL go through Catena. CRI-O's DEL of a sandbox runs the conflist
// libcni cached at its ADD, not the file on disk: the adopted sandboxes'
// DELs go to the primary's plugins, which free their IP and veth, and
// Catena's records of them, left behind, are reclaimed by the reconciler
// once CRI-O no longer lists them (within grace + 2 intervals of the
// Stop; the new sandbox runs on meanwhile, as the agent's own pod does on
// a node). Nothing is left: no IP, veth, record or libcni entry.
func TestAgentCRIOInstallAdopts(t *testing.T) {
	const (
		interval = 500 * time.Millisecond
		grace    = 2 * time.Second
	)
	start := time.Now()
	n := newCRIOAgentNode(t)
	w, c := n.w, n.c
	up := time.Since(start)

	before := []string{c.mustRunPod("before-a", 0), c.mustRunPod("before-b", 0)}
	require.Len(t, w.ipamFiles(n.net), 2, "the primary's host-local handed out the IPs")
	require.Empty(t, w.records(n.net), "no Catena yet")
	for _, id := range before {
		require.Len(t, libcniEntries(t, id), 1, "CRI-O's libcni cache holds %s's result in %s", id, libcniResults)
	}

	offset := len(c.log())
	p := n.startRun(n.crioReconcileFlags(interval, grace)...)
	n.waitCatena(offset)
	assert.Contains(t, p.logText(), "adopted attachment")
	require.Len(t, w.records(n.net), 2, "both pre-existing sandboxes are adopted")
	for _, id := range before {
		rec := readRecord(t, n.recordPath(id))
		assert.Equal(t, "complete", rec["phase"], id)
		steps, _ := rec["steps"].([]any)
		require.Len(t, steps, 1, id)
		assert.Equal(t, "added", steps[0].(map[string]any)["state"], id)
	}

	after := c.mustRunPod("after", 0)
	adds := opsFor(catenaOps(t, w.cacheDir), "ADD", after)
	require.Len(t, adds, 1, "the new sandbox's ADD goes through Catena\n%s", c.logTail())
	assert.Equal(t, "ok", adds[0].Outcome)
	_, ip, _, err := c.podStatus(after)
	require.NoError(t, err)
	assert.Contains(t, fmt.Sprint(readRecord(t, n.recordPath(after))["result"]), ip, "CRI-O reports the IP Catena recorded")
	assert.Len(t, w.records(n.net), 3)
	assert.Len(t, w.ipamFiles(n.net), 3)
	assert.Len(t, w.hostVeths(), 3)

	// the new sandbox runs on, as the agent's own pod does on a node: an
	// empty list would prove nothing (docs/reconciler.md, rule 5)
	n.stopRemove(before...)
	assert.Equal(t, []string{after}, c.pods())
	assert.Len(t, w.ipamFiles(n.net), 1, "the adopted sandboxes' IPs are freed")
	assert.Len(t, w.hostVeths(), 1, "and their veths")
	for _, id := range before {
		assert.Empty(t, libcniEntries(t, id), id)
		assert.Empty(t, opsFor(catenaOps(t, w.cacheDir), "DEL", id), "%s's DEL runs the primary's conflist cached at its ADD", id)
	}
	assert.Contains(t, c.log(), `from CNI network \"`+n.net+`\" (type=bridge)`, "CRI-O's DEL of an adopted sandbox, as its log quotes it")
	took := p.waitFor("the adopted records reclaimed", 30*time.Second, func() (bool, string) {
		left := len(w.records(n.net))
		return left == 1, fmt.Sprintf("%d records left", left)
	})
	reclaims := n.reclaimsCounted(p, 2)
	require.Len(t, reclaims, 2, "one reclaim per adopted sandbox")
	for _, op := range reclaims {
		assert.Equal(t, "ok", op.Outcome, "%+v", op)
	}
	assert.LessOrEqual(t, took, grace+2*interval+3*time.Second, "reclaimed within grace + 2 intervals (+ 3 s: the teardowns, a loaded machine)")

	n.stopRemove(after)
	dels := opsFor(catenaOps(t, w.cacheDir), "DEL", after)
	require.NotEmpty(t, dels, "the new sandbox's DEL goes through Catena")
	assert.Equal(t, "ok", dels[0].Outcome)
	assert.Len(t, dels[0].Calls, 1)
	assert.Empty(t, libcniEntries(t, after))
	n.requireNothingHeld()
	assert.Len(t, n.opsOf("RECLAIM"), 2, "nothing else reclaimed")
	t.Logf("CRI-O node, run over a primary with 2 sandboxes (CRI-O up in %s): 2 adopted, new sandbox through Catena; "+
		"after Stop+Remove of 3: the adopted ones' records reclaimed %s after their Stop; %d IPs, %d veths, %d records; test took %s",
		up.Round(time.Millisecond), took.Round(time.Millisecond), len(w.ipamFiles(n.net)), len(w.hostVeths()),
		len(w.records(n.net)), time.Since(start).Round(time.Millisecond))
}

// TestAgentCRIOUninstall is the agent's uninstall on a CRI-O node, as
// deploy/uninstall.yaml runs it (the binaries kept): it removes the
// generated conflist and leaves the primary byte for byte; CRI-O reloads
// its network_dir and runs a new sandbox through the primary, not Catena.
// The sandbox made through Catena is still torn down through Catena: CRI-O
// DELs it with the conflist libcni cached at its ADD, Catena's, so its
// record goes too (under containerd its DEL reaches the primary's plugins
// and the record stays). Nothing is held afterwards.
func TestAgentCRIOUninstall(t *testing.T) {
	start := time.Now()
	n := newCRIOAgentNode(t)
	w, c := n.w, n.c
	offset := len(c.log())
	n.installOnce()
	n.waitCatena(offset)
	primary, err := os.ReadFile(filepath.Join(n.confDir, primaryName))
	require.NoError(t, err)

	catID := c.mustRunPod("viacatena", 0)
	require.Len(t, opsFor(catenaOps(t, w.cacheDir), "ADD", catID), 1)
	require.Len(t, w.records(n.net), 1)

	offset = len(c.log())
	out, errOut, code := n.agent("uninstall", "--cni-conf-dir", n.confDir, "--cache-dir", w.cacheDir)
	require.Zero(t, code, "uninstall: %s%s", out, errOut)
	_, err = os.Stat(filepath.Join(n.confDir, generatedName))
	assert.ErrorIs(t, err, os.ErrNotExist, "the generated conflist is removed")
	after, err := os.ReadFile(filepath.Join(n.confDir, primaryName))
	require.NoError(t, err)
	assert.Equal(t, string(primary), string(after), "the primary is untouched byte for byte")
	assert.Contains(t, out, "1 attachment(s) still have a record")
	assert.Contains(t, out, catID)
	n.waitPrimary(offset)

	plainID := c.mustRunPod("plain", 0)
	assert.Empty(t, opsFor(catenaOps(t, w.cacheDir), "ADD", plainID), "the new sandbox does not go through Catena")
	assert.Len(t, w.ipamFiles(n.net), 2)

	n.stopRemove(catID, plainID)
	n.requireNothingHeld()
	assert.Empty(t, libcniEntries(t, catID))
	assert.Empty(t, libcniEntries(t, plainID))
	dels := opsFor(catenaOps(t, w.cacheDir), "DEL", catID)
	require.NotEmpty(t, dels, "the Catena sandbox's DEL runs Catena's conflist, cached at its ADD")
	assert.Equal(t, "ok", dels[0].Outcome)
	assert.Len(t, dels[0].Calls, 1)
	assert.Empty(t, opsFor(catenaOps(t, w.cacheDir), "DEL", plainID), "the plain sandbox's DEL does not")
	t.Logf("CRI-O node, uninstall: primary unchanged (%d bytes); after Stop+Remove of the Catena and the plain sandbox: %d IPs, %d veths, %d records left; test took %s",
		len(primary), len(w.ipamFiles(n.net)), len(w.hostVeths()), len(w.records(n.net)), time.Since(start).Round(time.Millisecond))
}
