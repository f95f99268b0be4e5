package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	catenactlOnce sync.Once
	catenactlPath string
	catenactlErr  error
)

// catenactlBin builds cmd/catenactl once per run, into TestMain's temp CNI
// dir (removed when the run ends), in a subdir no plugin lookup sees.
func catenactlBin(t *testing.T) string {
	t.Helper()
	catenactlOnce.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		dir := filepath.Join(cniPath, ".tools")
		if catenactlErr = os.MkdirAll(dir, 0o755); catenactlErr != nil {
			return
		}
		catenactlPath = filepath.Join(dir, "catenactl")
		cmd := exec.Command("go", "build", "-trimpath", "-o", catenactlPath, "./cmd/catenactl")
		cmd.Dir = filepath.Dir(filepath.Dir(here))
		if out, err := cmd.CombinedOutput(); err != nil {
			catenactlErr = fmt.Errorf("building catenactl: %w\n%s", err, out)
		}
	})
	require.NoError(t, catenactlErr)
	return catenactlPath
}

// ctl is catenactl bound to one conflist file and CNI dir.
type ctl struct {
	t        *testing.T
	bin      string
	conf     string
	cniDir   string
	list     *libcni.NetworkConfigList
	cacheDir string
}

// newCtl writes a 1.1.0 catena conflist (gcGracePeriod 1ms, lockTimeout
// 10s) to a file that catenactl reads, and parses the same bytes for libcni.
func (w *world) newCtl(name string, delegates ...string) *ctl {
	w.t.Helper()
	return w.newCtlLock(name, 10*time.Second, delegates...)
}

// newCtlLock is newCtl with the given lockTimeout.
func (w *world) newCtlLock(name string, lockTimeout time.Duration, delegates ...string) *ctl {
	w.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[{"type":"catena","cacheDir":%q,
	  "delegateTimeout":"20s","lockTimeout":%q,"gcGracePeriod":"1ms","delegates":[%s]}]}`,
		name, w.cacheDir, lockTimeout, strings.Join(delegates, ","))
	path := filepath.Join(w.t.TempDir(), "10-"+name+".conflist")
	require.NoError(w.t, os.WriteFile(path, []byte(conf), 0o600))
	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(w.t, err)
	return &ctl{t: w.t, bin: catenactlBin(w.t), conf: path, cniDir: cniPath, list: list, cacheDir: w.cacheDir}
}

// command is catenactl with args, on the ctl's conflist and CNI dir.
func (c *ctl) command(args ...string) *exec.Cmd {
	return exec.Command(c.bin, append([]string{"--conf", c.conf, "--cni-path", c.cniDir}, args...)...)
}

// run runs catenactl and returns its stdout, stderr and exit code.
func (c *ctl) run(args ...string) (string, string, int) {
	c.t.Helper()
	cmd := c.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(c.t, err)
	}
	return stdout.String(), stderr.String(), code
}

// jsonOf runs catenactl with --json, requires the exit code, and decodes.
func jsonOf[T any](c *ctl, wantCode int, args ...string) T {
	c.t.Helper()
	out, stderr, code := c.run(append(args, "--json")...)
	require.Equal(c.t, wantCode, code, "catenactl %v: %s", args, stderr)
	var v T
	require.NoError(c.t, json.Unmarshal([]byte(out), &v), "%s", out)
	return v
}

// fields splits each line of a table into its whitespace-separated cells.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// hasRowPrefix reports whether a line of out starts with the cells prefix.
func hasRowPrefix(out string, prefix ...string) bool {
	return slices.ContainsFunc(fields(out), func(r []string) bool {
		return len(r) >= len(prefix) && slices.Equal(r[:len(prefix)], prefix)
	})
}

type ctlCheck struct {
	Check, Status, Detail, Hint string
	Items                       []string
}

func checksByName(checks []ctlCheck) map[string]ctlCheck {
	m := map[string]ctlCheck{}
	for _, c := range checks {
		m[c.Check] = c
	}
	return m
}

// TestCatenactlListShowDoctor: a real chain's attachment as list, show and
// doctor report it.
func TestCatenactlListShowDoctor(t *testing.T) {
	w := newWorld(t)
	const net = "itctl"
	c := w.newCtl(net, w.bridgeDelegate(), tuningDelegate)
	rt := w.container("a")
	_, err := w.cni.AddNetworkList(bg, c.list, rt)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, c.list, rt) })
	ips := w.ipamFiles(net)
	require.Len(t, ips, 1)

	out, stderr, code := c.run("list")
	require.Equal(t, 0, code, stderr)
	rows := fields(out)
	require.Len(t, rows, 2, out)
	assert.Equal(t, []string{"NETWORK", "CONTAINER", "IFNAME", "PHASE", "AGE", "ATTEMPTS", "NEXT", "DELEGATES"}, rows[0])
	assert.Equal(t, []string{net, rt.ContainerID, "eth0", "complete"}, rows[1][:4])
	assert.Equal(t, []string{"0", "-", "bridge:added", "tuning:added"}, rows[1][5:])

	recs := jsonOf[[]struct {
		Key   struct{ Network, ContainerID, IfName string }
		Phase string
		NetNS string
		Steps []struct {
			Type, State string
			Result      struct {
				IPs []struct{ Address string }
			}
		}
	}](c, 0, "show", rt.ContainerID)
	require.Len(t, recs, 1)
	rec := recs[0]
	assert.Equal(t, rt.NetNS, rec.NetNS)
	assert.Equal(t, "complete", rec.Phase)
	require.Len(t, rec.Steps, 2)
	assert.Equal(t, "bridge", rec.Steps[0].Type)
	require.Len(t, rec.Steps[0].Result.IPs, 1)
	assert.True(t, strings.HasPrefix(rec.Steps[0].Result.IPs[0].Address, ips[0]+"/"), "bridge's recorded result holds the IP host-local allocated: %s", rec.Steps[0].Result.IPs[0].Address)

	out, stderr, code = c.run("show", rt.ContainerID, "--ifname", "eth0")
	require.Equal(t, 0, code, stderr)
	rows = fields(out)
	assert.Contains(t, rows, []string{"attachment", net + "/" + rt.ContainerID + "/eth0"})
	assert.Contains(t, rows, []string{"netns", rt.NetNS})
	assert.Contains(t, out, "delegate 0 (bridge) result: ")
	assert.Contains(t, out, ips[0])

	checks := jsonOf[struct {
		OK     bool
		Checks []ctlCheck
	}](c, 0, "doctor")
	assert.True(t, checks.OK)
	byName := checksByName(checks.Checks)
	for _, name := range []string{"config", "catena plugin", "delegate 0 (bridge)", "delegate 1 (tuning)", "cache dir", "records", "locks"} {
		assert.Equal(t, "ok", byName[name].Status, "%s: %s", name, byName[name].Detail)
	}
	assert.Contains(t, byName["delegate 0 (bridge)"].Detail, "supports cniVersion 1.1.0")
	assert.Equal(t, "1 complete, 0 in flight, none stuck in teardown", byName["records"].Detail)

	// A cache dir that others can read is a problem with a hint.
	require.NoError(t, os.Chmod(w.cacheDir, 0o755))
	out, stderr, code = c.run("doctor")
	require.NoError(t, os.Chmod(w.cacheDir, 0o700))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "doctor found 1 problem(s)")
	assert.Contains(t, out, w.cacheDir+": mode 0755, want 0700")
	assert.Contains(t, out, "hint: chmod 0700")
}

// TestCatenactlRepairHealsFailedRollback: a rollback whose DEL fails keeps
// the IP held and recorded; doctor reports it, repair fails while the fault
// lasts and heals it once it is gone, and stats shows what happened.
func TestCatenactlRepairHealsFailedRollback(t *testing.T) {
	w := newWorld(t)
	const net = "itctlrep"
	fault := filepath.Join(t.TempDir(), "fault")
	require.NoError(t, os.WriteFile(fault, nil, 0o600))
	c := w.newCtl(net, w.bridgeDelegate(), failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fault)), failer(`"failAdd":true`))
	rt := w.container("broken")
	_, err := w.cni.AddNetworkList(bg, c.list, rt)
	require.Error(t, err)
	require.Len(t, w.ipamFiles(net), 1, "the IP stays held")

	out, _, code := c.run("list")
	require.Equal(t, 0, code)
	row := fields(out)[1]
	assert.Equal(t, "needs-teardown", row[3])
	require.Len(t, row, 10, out)
	assert.Equal(t, "1", row[5], "one teardown attempt: the rollback")
	assert.Regexp(t, `^(now|[0-9]+s)$`, row[6], "next retry 1 s after the rollback: %s", out)
	assert.Equal(t, []string{"bridge:added", "failer:del-failed", "failer:deleted"}, row[7:])
	checks := jsonOf[struct{ Checks []ctlCheck }](c, 1, "doctor")
	records := checksByName(checks.Checks)["records"]
	assert.Equal(t, "problem", records.Status)
	require.Len(t, records.Items, 1)
	assert.Contains(t, records.Items[0], net+"/"+rt.ContainerID+"/eth0 needs-teardown")
	assert.Contains(t, records.Items[0], "delegate 1 (failer) del-failed")

	out, stderr, code := c.run("repair")
	assert.Equal(t, 1, code, "the fault is still there")
	assert.Contains(t, stderr, "1 record(s) still need teardown")
	assert.True(t, hasRowPrefix(out, "failed", rt.ContainerID, "eth0"), out)
	assert.Len(t, w.ipamFiles(net), 1)

	require.NoError(t, os.Remove(fault))
	out, stderr, code = c.run("repair")
	require.Equal(t, 0, code, stderr)
	assert.True(t, hasRowPrefix(out, "repaired", rt.ContainerID, "eth0", "-"), out)
	assert.Contains(t, out, `repair of network "itctlrep": 1 repaired, 0 failed, 0 skipped`)
	assert.Empty(t, w.ipamFiles(net), "the IP is freed")
	assert.Empty(t, w.hostVeths())
	assert.Empty(t, w.records(net))
	_, _, code = c.run("doctor")
	assert.Equal(t, 0, code)

	st := jsonOf[struct {
		Operations []struct {
			Verb                       string
			Count, Failures, Rollbacks int
		}
	}](c, 0, "stats")
	byVerb := map[string][3]int{}
	for _, o := range st.Operations {
		byVerb[o.Verb] = [3]int{o.Count, o.Failures, o.Rollbacks}
	}
	assert.Equal(t, [3]int{1, 1, 1}, byVerb["ADD"], "one ADD, failed and rolled back")
	assert.Equal(t, [3]int{2, 1, 0}, byVerb["REPAIR"], "two repairs, the first failed")
}

// TestCatenactlAbandonRemovedBinary: a delegate's binary is removed from
// the node, so its DEL can never succeed; repair --abandon marks it
// abandoned and finishes the teardown past it.
func TestCatenactlAbandonRemovedBinary(t *testing.T) {
	w := newWorld(t)
	const net = "itctlab"
	bin := t.TempDir()
	for _, p := range []string{"catena", "bridge", "host-local"} {
		require.NoError(t, os.Symlink(filepath.Join(cniPath, p), filepath.Join(bin, p)))
	}
	require.NoError(t, os.Symlink(filepath.Join(cniPath, "failer"), filepath.Join(bin, "vanishing")))
	c := w.newCtl(net, w.bridgeDelegate(), `{"type":"vanishing"}`)
	c.cniDir = bin
	rtm := libcni.NewCNIConfigWithCacheDir([]string{bin}, t.TempDir(), nil)
	rt := w.container("ab")
	_, err := rtm.AddNetworkList(bg, c.list, rt)
	require.NoError(t, err)
	require.Len(t, w.ipamFiles(net), 1)

	require.NoError(t, os.Remove(filepath.Join(bin, "vanishing")))
	require.Error(t, rtm.DelNetworkList(bg, c.list, rt), "the removed delegate's DEL fails")
	require.Len(t, w.ipamFiles(net), 1, "strict reverse order: bridge was not DELed")
	_, stderr, code := c.run("repair")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "still need teardown")

	out, stderr, code := c.run("repair", "--abandon", rt.ContainerID, "--delegate", "1")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "abandoned delegate 1 of "+net+"/"+rt.ContainerID+"/eth0 at ")
	assert.True(t, hasRowPrefix(out, "repaired", rt.ContainerID, "eth0", "-"), out)
	assert.Empty(t, w.ipamFiles(net), "bridge's DEL ran past the abandoned delegate")
	assert.Empty(t, w.records(net))
}

// TestCatenactlGCStaleNetNS: gc --stale-netns tears down only the record
// whose netns is gone.
func TestCatenactlGCStaleNetNS(t *testing.T) {
	w := newWorld(t)
	const net = "itctlgc"
	c := w.newCtl(net, w.bridgeDelegate(), tuningDelegate)
	live, gone := w.container("live"), w.container("gone")
	for _, rt := range []*libcni.RuntimeConf{live, gone} {
		_, err := w.cni.AddNetworkList(bg, c.list, rt)
		require.NoError(t, err)
	}
	t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, c.list, live) })
	require.Len(t, w.ipamFiles(net), 2)
	run(t, "ip", "netns", "del", filepath.Base(gone.NetNS))
	time.Sleep(10 * time.Millisecond) // past the 1ms grace period

	out, stderr, code := c.run("gc", "--stale-netns", "--dry-run")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, fields(out), []string{"would", "tear", "down", gone.ContainerID, "eth0", "-"})
	assert.Contains(t, out, "netns "+live.NetNS+" still exists")
	assert.Len(t, w.ipamFiles(net), 2, "a dry run changes nothing")
	assert.Len(t, w.records(net), 2)

	rep := jsonOf[struct {
		TornDown []struct{ ContainerID string }
		Skipped  []struct{ Reason string }
		Errors   []string
	}](c, 0, "gc", "--stale-netns")
	require.Len(t, rep.TornDown, 1)
	assert.Equal(t, gone.ContainerID, rep.TornDown[0].ContainerID)
	assert.Empty(t, rep.Errors)
	require.Len(t, rep.Skipped, 1)
	assert.Contains(t, rep.Skipped[0].Reason, "still exists")
	assert.Len(t, w.ipamFiles(net), 1, "only the stale attachment's IP is freed")
	recs := w.records(net)
	require.Len(t, recs, 1)
	assert.Contains(t, recs[0], live.ContainerID)
	require.NoError(t, w.cni.CheckNetworkList(bg, c.list, live), "the live attachment still checks out")
	assert.Len(t, w.sandboxAddrsOf(live.NetNS, "eth0"), 1)
}
