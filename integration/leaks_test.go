package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/leaks"
)

// leaksNode is a containerd node whose primary is the plain chain [bridge +
// host-local, portmap, failer failing ADD and DEL while a fault file
// exists]: each sandbox started under the fault leaks its IP and its DNAT
// chain (containerd's DEL stops at the failer), beside live pods.
type leaksNode struct {
	*agentNode
	fault string
	dir   string // the reports
	sock  string // the runtime's CRI socket
	// plugins are the primary's plugins but the failer, which the test's
	// cleanup DELs leaks through with the failer that no longer fails.
	plugins []string
	// cniPath is catenactl's --cni-path ("": the node's bin dir).
	cniPath string
}

func newLeaksNode(t *testing.T, v containerdVersion) *leaksNode {
	t.Helper()
	n := newAgentNode(t, &v)
	require.NoError(t, os.Symlink(filepath.Join(cniPath, "failer"), filepath.Join(n.binDir, "failer")))
	ln := &leaksNode{agentNode: n, fault: filepath.Join(t.TempDir(), "fault"), dir: t.TempDir(), sock: n.d.sock,
		plugins: []string{n.w.bridgeDelegate(), portmapDelegate}}
	n.writePrimary(n.primary(ln.failer()))
	n.waitLoaded(false)
	return ln
}

// failer fails ADD and DEL while the node's fault file exists.
func (ln *leaksNode) failer() string {
	return failer(fmt.Sprintf(`"failAdd":true,"failDel":true,"faultFile":%q`, ln.fault))
}

// cleanupLeaks DELs the leaked owners ids through the primary (the fault
// lifted) at the test's end: whatever the test did not release is not left
// on the machine. A DEL is idempotent.
func (ln *leaksNode) cleanupLeaks(ids []string) {
	ln.t.Helper()
	primary := ln.w.plainList(ln.net, "1.1.0", append(slices.Clone(ln.plugins), failer(""))...)
	ln.t.Cleanup(func() {
		for _, id := range ids {
			rt := &libcni.RuntimeConf{ContainerID: id, IfName: "eth0",
				CapabilityArgs: map[string]any{"portMappings": []map[string]any{{"hostPort": 1, "containerPort": 80, "protocol": "tcp"}}}}
			if err := ln.w.cni.DelNetworkList(context.Background(), primary, rt); err != nil {
				ln.t.Logf("cleanup: DEL of the leaked %s: %v", id, err)
			}
		}
	})
}

// ipOf is the address host-local reserved for owner id.
func (ln *leaksNode) ipOf(id string) string {
	ln.t.Helper()
	for _, ip := range ln.w.ipamFiles(ln.net) {
		raw, err := os.ReadFile(filepath.Join(ln.w.ipamDir, ln.net, ip))
		require.NoError(ln.t, err)
		if owner, _, _ := strings.Cut(string(raw), "\r\n"); owner == id {
			return ip
		}
	}
	ln.t.Fatalf("no reservation of %s", id)
	return ""
}

// leakedOwners are the owners of the network's reservations but live.
func (ln *leaksNode) leakedOwners(live []string) []string {
	ln.t.Helper()
	var ids []string
	for _, ip := range ln.w.ipamFiles(ln.net) {
		raw, err := os.ReadFile(filepath.Join(ln.w.ipamDir, ln.net, ip))
		require.NoError(ln.t, err)
		if id, _, _ := strings.Cut(string(raw), "\r\n"); !slices.Contains(live, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// catenactl runs catenactl with the node's dirs and returns its stdout,
// stderr and exit code.
func (ln *leaksNode) catenactl(args ...string) (string, string, int) {
	ln.t.Helper()
	cniPath := ln.cniPath
	if cniPath == "" {
		cniPath = ln.binDir
	}
	all := append(args, "--cache-dir", ln.w.cacheDir, "--cni-conf-dir", ln.confDir, "--results-dir", libcniResults,
		"--runtime-endpoint", ln.sock, "--cni-path", cniPath)
	cmd := exec.Command(filepath.Join(ln.src, "catenactl"), all...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		ln.t.Fatalf("catenactl %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// report runs `catenactl leaks --output` and returns the report.
func (ln *leaksNode) report(name string, extra ...string) (*leaks.Report, string) {
	ln.t.Helper()
	path := filepath.Join(ln.dir, name)
	out, errOut, code := ln.catenactl(append([]string{"leaks", "--output", path}, extra...)...)
	require.Zero(ln.t, code, "catenactl leaks: %s%s", out, errOut)
	raw, err := os.ReadFile(path)
	require.NoError(ln.t, err)
	var r leaks.Report
	require.NoError(ln.t, json.Unmarshal(raw, &r))
	return &r, path
}

// leaked are the owners of a report's leaks of kind.
func leaked(r *leaks.Report, kind string) []string {
	var ids []string
	for _, f := range r.Leaks() {
		if f.Kind == kind {
			ids = append(ids, f.Owner.ContainerID)
		}
	}
	slices.Sort(ids)
	return ids
}

// cachedLeak leaks an attachment the way a runtime that lost its sandbox
// after a successful ADD does: the primary's plugins but the failer ADDed
// through libcni (which caches the result and the config in the runtime's
// libcni cache), then its netns deleted. Its IP, DNAT chain and cache entry
// stay, until Catena's install adopts the entry into a record. It returns
// the owner.
func (ln *leaksNode) cachedLeak() string {
	ln.t.Helper()
	id := fmt.Sprintf("cached%d", os.Getpid())
	list := ln.w.plainList(ln.net, "1.1.0", ln.plugins...)
	cni := libcni.NewCNIConfigWithCacheDir([]string{ln.binDir}, filepath.Dir(libcniResults), nil)
	ns := filepath.Base(ln.w.addNetns(ln.w.id + "-cached"))
	rt := &libcni.RuntimeConf{ContainerID: id, IfName: "eth0", NetNS: "/var/run/netns/" + ns, CapabilityArgs: portMapping(int(hostPort()))}
	_, err := cni.AddNetworkList(context.Background(), list, rt)
	require.NoError(ln.t, err)
	entry := filepath.Join(libcniResults, ln.net+"-"+id+"-eth0")
	require.FileExists(ln.t, entry, "libcni cached the ADD")
	ln.t.Cleanup(func() {
		rt.NetNS = ""
		if err := cni.DelNetworkList(context.Background(), list, rt); err != nil {
			ln.t.Logf("cleanup: DEL of %s: %v", id, err)
		}
		_ = os.Remove(entry)
	})
	run(ln.t, "ip", "netns", "del", ns)
	return id
}

// orphanVeth puts a veth on the chain's bridge whose peer is in a
// namespace only an open fd of a sleeping process holds (no process in it,
// no mount): a sandbox's veth whose namespace a runtime leaked. It returns
// the veth and the process's pid.
func (ln *leaksNode) orphanVeth() (string, int) {
	ln.t.Helper()
	ns := filepath.Base(ln.w.addNetns(ln.w.id + "-orphan"))
	veth := fmt.Sprintf("vor%d", os.Getpid()%100000)
	run(ln.t, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth9", "netns", ns)
	ln.t.Cleanup(func() { _ = exec.Command("ip", "link", "del", veth).Run() })
	run(ln.t, "ip", "link", "set", veth, "master", ln.w.bridge, "up")
	holder := exec.Command("bash", "-c", `exec 3<"$1"; exec sleep 600`, "-", "/var/run/netns/"+ns)
	require.NoError(ln.t, holder.Start())
	ln.t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	require.Eventually(ln.t, func() bool {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", holder.Process.Pid))
		return err == nil && strings.TrimSpace(string(comm)) == "sleep"
	}, 5*time.Second, 20*time.Millisecond, "the sleeper holds the namespace")
	run(ln.t, "ip", "netns", "del", ns)
	return veth, holder.Process.Pid
}

// kindOf are the report's findings of kind, by item.
func kindOf(r *leaks.Report, kind string) map[string]leaks.Finding {
	m := map[string]leaks.Finding{}
	for _, f := range r.Findings {
		if f.Kind == kind {
			m[f.Item] = f
		}
	}
	return m
}

// TestLeaksBeforeCatena: a containerd 2.4 node ran the plain chain, and
// each of 3 sandboxes started while its last plugin failed ADD and DEL
// leaked an IP and its DNAT chain, beside 2 live pods; then Catena was
// installed by its agent. The report finds exactly the 3 leaks of each kind
// and none of the live pods'; a repair from one report is refused, and
// from two releases all of them through host-local's and portmap's own
// DEL; the live pods keep their IPs and rules.
func TestLeaksBeforeCatena(t *testing.T) {
	const leaking = 3
	ln := newLeaksNode(t, containerd24())
	var live []string
	for i := range 2 {
		id, err := ln.d.runPod(ln.d.podConfig(fmt.Sprintf("live%d", i), hostPort()))
		require.NoError(t, err, ln.d.logTail())
		live = append(live, id)
		t.Cleanup(func() {
			if err := ln.d.stopPod(id); err != nil {
				t.Logf("cleanup: stop %s: %v", id, err)
			}
			_ = ln.d.removePod(id)
		})
	}
	liveIPs := map[string]string{}
	for _, id := range live {
		_, ip, err := ln.d.podStatus(id)
		require.NoError(t, err)
		liveIPs[id] = ip
	}
	touch(t, ln.fault)
	for range leaking {
		_, err := ln.d.runPod(ln.d.podConfig("leak", hostPort()))
		require.Error(t, err, "the failer fails the sandbox's ADD")
	}
	require.NoError(t, os.Remove(ln.fault))
	require.Len(t, ln.w.ipamFiles(ln.net), 2+leaking, "each failed sandbox leaked its IP: the plain chain's DEL stopped at the failer")
	made := ln.leakedOwners(live)
	ln.cleanupLeaks(made)
	cached := ln.cachedLeak()
	ln.installOnce()
	ln.waitLoaded(true)
	veth, sleeper := ln.orphanVeth()
	// The first leak's address is on an interface of a network namespace
	// that is still mounted (a sandbox the runtime lost, its netns held):
	// it, and its chain, are kept.
	lost := made[0]
	lostIP := ln.ipOf(lost)
	ns := filepath.Base(ln.w.addNetns(ln.w.id + "-lost"))
	run(t, "ip", "netns", "exec", ns, "ip", "addr", "add", lostIP+"/32", "dev", "lo")

	r1, p1 := ln.report("r1.json", "--min-age", "0s")
	var ids []string
	for _, f := range r1.Findings {
		if f.Kind == leaks.KindHostLocal && !slices.Contains(live, f.Owner.ContainerID) && f.Owner.ContainerID != cached {
			ids = append(ids, f.Owner.ContainerID)
		}
		if slices.Contains(live, f.Owner.ContainerID) {
			assert.Equal(t, leaks.Keep, f.Verdict, "a live pod's %s %s: %s", f.Kind, f.Item, f.Why)
		}
	}
	slices.Sort(ids)
	require.Equal(t, made, ids, "the report names the owners of the leaked reservations")
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == lost })
	assert.Equal(t, ids, leaked(r1, leaks.KindHostLocal), "exactly the leaked IPs but the one a live netns holds")
	assert.Equal(t, ids, leaked(r1, leaks.KindPortmap), "and their DNAT chains")
	entry := filepath.Join(libcniResults, ln.net+"-"+cached+"-eth0")
	// The agent's install adopted the cached attachment into a Catena
	// record: its reconciler, not a repair, reclaims it.
	for _, f := range r1.Findings {
		if f.Owner.ContainerID == cached {
			assert.Equal(t, leaks.Keep, f.Verdict, "%s %s of the adopted owner", f.Kind, f.Item)
			if f.Kind != leaks.KindRecord && f.Kind != leaks.KindLibcni {
				assert.Contains(t, f.Why, "Catena holds a record of")
			}
		}
	}
	assert.Equal(t, leaks.Keep, kindOf(r1, leaks.KindLibcni)[filepath.Base(entry)].Verdict, "the runtime's cache file itself is kept")
	veths := kindOf(r1, leaks.KindVeth)
	require.Contains(t, veths, veth, "the veth whose namespace no process is in")
	assert.Len(t, veths, 1, "no live pod's veth is a finding: %v", veths)
	assert.Equal(t, leaks.Keep, veths[veth].Verdict)
	assert.Contains(t, veths[veth].Why, fmt.Sprintf("held only by an open fd of pid %d (sleep)", sleeper))
	for _, f := range r1.Findings {
		if f.Owner.ContainerID == lost && f.Kind == leaks.KindHostLocal {
			assert.Equal(t, leaks.Keep, f.Verdict)
			assert.Contains(t, f.Why, "/run/netns/"+ns)
		}
	}
	t.Logf("catenactl leaks found %d host-local and %d portmap leaks of %d failed sandboxes, kept the %d live pods'",
		len(leaked(r1, leaks.KindHostLocal)), len(leaked(r1, leaks.KindPortmap)), leaking, len(live))

	out, errOut, code := ln.catenactl("repair", "--from-report", p1, "--confirm-after", "1s", "--min-age", "0s")
	assert.Equal(t, 1, code, "one report is refused: %s%s", out, errOut)
	assert.Contains(t, errOut, "a release needs two")
	time.Sleep(1100 * time.Millisecond)
	_, p2 := ln.report("r2.json", "--min-age", "0s")
	out, errOut, code = ln.catenactl("repair", "--from-report", p1, "--from-report", p2, "--confirm-after", "1s", "--min-age", "0s", "--dry-run")
	require.Zero(t, code, "dry run: %s%s", out, errOut)
	require.Len(t, ln.w.ipamFiles(ln.net), 2+leaking+1, "a dry run releases nothing")
	liveIPs[lost] = lostIP            // kept, as its netns holds it
	liveIPs[cached] = ln.ipOf(cached) // kept, as Catena's record holds it

	// A delegate whose DEL fails (bridge finds no host-local in this
	// CNI path) leaves its findings, and the repair exits non-zero; the
	// portmap chains are released meanwhile.
	broken := t.TempDir()
	for _, p := range []string{"bridge", "portmap"} {
		require.NoError(t, os.Symlink(filepath.Join(cniPath, p), filepath.Join(broken, p)))
	}
	ln.cniPath = broken
	out, errOut, code = ln.catenactl("repair", "--from-report", p1, "--from-report", p2, "--confirm-after", "1s", "--min-age", "0s")
	ln.cniPath = ""
	assert.Equal(t, 1, code, "a failed DEL fails the repair: %s%s", out, errOut)
	assert.Contains(t, out, fmt.Sprintf("%d released, %d failed", len(ids), len(ids)))
	assert.Contains(t, errOut, "their findings are still held")
	require.Len(t, ln.w.ipamFiles(ln.net), 2+leaking+1, "the failed DELs freed no IP")

	out, errOut, code = ln.catenactl("repair", "--from-report", p1, "--from-report", p2, "--confirm-after", "1s", "--min-age", "0s")
	require.Zero(t, code, "repair --from-report: %s%s", out, errOut)
	t.Logf("catenactl repair --from-report:\n%s", out)
	assert.Contains(t, out, fmt.Sprintf("%d released, 0 failed", len(ids)), "the reservations; the chains went in the failed run")
	held := ln.w.ipamFiles(ln.net)
	var liveHeld []string
	for _, ip := range liveIPs {
		liveHeld = append(liveHeld, ip)
	}
	assert.ElementsMatch(t, liveHeld, held, "only the live pods' IPs, and the one a live netns holds, are held")
	save := run(t, "iptables-save")
	for _, id := range ids {
		assert.False(t, portmapRulesFor(save, id), "no DNAT rule of the leaked %s", id)
	}
	assert.True(t, portmapRulesFor(save, lost), "the kept leak keeps its chain")
	for _, id := range live {
		assert.True(t, portmapRulesFor(save, id), "the live pod %s keeps its DNAT rules", id)
		state, ip, err := ln.d.podStatus(id)
		require.NoError(t, err)
		assert.Equal(t, liveIPs[id], ip)
		assert.Equal(t, "SANDBOX_READY", state.String())
	}
	r3, _ := ln.report("r3.json", "--min-age", "0s")
	assert.Empty(t, r3.Leaks(), "nothing left to release")
	ops := catenaOps(t, ln.w.cacheDir)
	releases := 0
	for _, op := range ops {
		if op.Verb == leaks.VerbRelease && op.Outcome == "ok" {
			releases++
		}
	}
	assert.Equal(t, 2*len(ids), releases, "each release journaled")
	t.Logf("LEAKS containerd 2.4: %d leaked by failed sandboxes, %d found (1 more kept: its netns is live), %d released, %d live kept; "+
		"1 lost sandbox with a libcni cache entry adopted by the install and kept; 1 orphan veth reported and kept", leaking, len(ids), len(ids), len(live))
}

// TestLeaksBeforeCatenaCRIO: the same on a CRI-O node, whose primary is
// [bridge + host-local, failer] (CRI-O maps host ports itself): 3 failed
// sandboxes leak 3 IPs beside 2 live pods; after the install, the report
// finds exactly those 3, and the repair from two reports releases them
// through bridge's DEL (host-local's), the live pods kept.
func TestLeaksBeforeCatenaCRIO(t *testing.T) {
	const leaking = 3
	requireCRIO(t)
	n := newAgentNode(t, nil)
	require.NoError(t, os.Symlink(filepath.Join(cniPath, "failer"), filepath.Join(n.binDir, "failer")))
	ln := &leaksNode{agentNode: n, fault: filepath.Join(t.TempDir(), "fault"), dir: t.TempDir(), plugins: []string{n.w.bridgeDelegate()}}
	primary := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[%s,%s]}`, n.net, n.w.bridgeDelegate(), ln.failer())
	c := startCRIOWith(t, n.w, "", crioSetup{files: map[string]string{primaryName: primary}, binDirs: []string{n.binDir}})
	n.confDir, ln.sock = c.confDir, "unix://"+c.sock
	c.waitNetworkReady()
	cn := &crioAgentNode{agentNode: n, c: c}

	var live []string
	for i := range 2 {
		id := c.mustRunPod(fmt.Sprintf("live%d", i), 0)
		live = append(live, id)
		t.Cleanup(func() { _ = c.stopPod(id); _ = c.removePod(id) })
	}
	touch(t, ln.fault)
	for range leaking {
		_, err := c.runPod(c.podConfig("leak", 0))
		require.Error(t, err, "the failer fails the sandbox's ADD")
	}
	require.NoError(t, os.Remove(ln.fault))
	made := ln.leakedOwners(live)
	require.Len(t, made, leaking, "each failed sandbox leaked its IP")
	ln.cleanupLeaks(made)
	offset := len(c.log())
	ln.installOnce()
	cn.waitCatena(offset)

	r1, p1 := ln.report("r1.json", "--min-age", "0s")
	assert.Equal(t, made, leaked(r1, leaks.KindHostLocal), "exactly the leaked IPs")
	for _, f := range r1.Findings {
		if slices.Contains(live, f.Owner.ContainerID) {
			assert.Equal(t, leaks.Keep, f.Verdict, "a live pod's %s %s: %s", f.Kind, f.Item, f.Why)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	_, p2 := ln.report("r2.json", "--min-age", "0s")
	out, errOut, code := ln.catenactl("repair", "--from-report", p1, "--from-report", p2, "--confirm-after", "1s", "--min-age", "0s")
	require.Zero(t, code, "repair --from-report: %s%s", out, errOut)
	assert.Contains(t, out, fmt.Sprintf("%d released, 0 failed", leaking))
	assert.Len(t, ln.w.ipamFiles(ln.net), len(live), "only the live pods' IPs are held")
	for _, id := range live {
		state, _, _, err := c.podStatus(id)
		require.NoError(t, err)
		assert.Equal(t, "SANDBOX_READY", state.String())
	}
	t.Logf("LEAKS CRI-O: %d leaked, %d found, %d released, %d live kept", leaking, len(leaked(r1, leaks.KindHostLocal)), leaking, len(live))
}
