package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/node/reconcile"
)

const testNet = "podnet"

// Script plugins, run for real through catena's executor. Each appends
// "<CNI_COMMAND> <CNI_CONTAINERID>" to calls.log beside itself, and answers
// VERSION with the versions given.
const pluginScript = `#!/bin/sh
cat >/dev/null
echo "$CNI_COMMAND ${CNI_CONTAINERID:--}" >>"$(dirname "$0")/calls.log"
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.1.0","supportedVersions":[%s]}'; exit 0 ;;
%s) echo '{"cniVersion":"1.1.0","code":11,"msg":"%s fails on purpose"}'; exit 1 ;;
esac
exit 0
`

// fixture is one test's private node: a CNI bin dir of script plugins, a
// cache dir, a conflist naming them, and catenactl run in process.
type fixture struct {
	t        *testing.T
	cacheDir string
	cniDir   string
	netDir   string
	confPath string
	now      time.Time
	store    *cache.DiskStore
	// sockets are the CRI sockets --runtime-endpoint auto tries.
	sockets []string
	// kubelet is kubelet's runtime endpoint auto sees ("": no kubelet).
	kubelet string
}

// newFixture writes a conflist whose catena entry has the given delegate
// types (default okplug, okplug) and a 1ms gcGracePeriod.
func newFixture(t *testing.T, delegates ...string) *fixture {
	t.Helper()
	if len(delegates) == 0 {
		delegates = []string{"okplug", "okplug"}
	}
	dir := t.TempDir()
	f := &fixture{
		t:        t,
		cacheDir: filepath.Join(dir, "cache"),
		cniDir:   filepath.Join(dir, "bin"),
		netDir:   filepath.Join(dir, "net.d"),
		now:      time.Now(),
	}
	require.NoError(t, os.Mkdir(f.cniDir, 0o755))
	require.NoError(t, os.Mkdir(f.netDir, 0o755))
	all := `"0.3.1","0.4.0","1.0.0","1.1.0"`
	for name, s := range map[string]string{
		"okplug":  fmt.Sprintf(pluginScript, all, "NONE", "okplug"),
		"badplug": fmt.Sprintf(pluginScript, all, "DEL", "badplug"),
		"oldplug": fmt.Sprintf(pluginScript, `"0.3.1"`, "NONE", "oldplug"),
		"catena":  fmt.Sprintf(pluginScript, all, "NONE", "catena"),
	} {
		require.NoError(t, os.WriteFile(filepath.Join(f.cniDir, name), []byte(s), 0o755))
	}
	ds := make([]string, len(delegates))
	for i, d := range delegates {
		ds[i] = fmt.Sprintf(`{"type":%q}`, d)
	}
	f.confPath = f.writeConf("10-podnet.conflist", fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[
	  {"type":"catena","cacheDir":%q,"gcGracePeriod":"1ms","lockTimeout":"2s","delegates":[%s]}]}`,
		testNet, f.cacheDir, strings.Join(ds, ",")))
	f.store = cache.NewDiskStore(afero.NewOsFs(), f.cacheDir, cache.NewFlockLocker(filepath.Join(f.cacheDir, "locks")))
	return f
}

func (f *fixture) writeConf(name, data string) string {
	f.t.Helper()
	p := filepath.Join(f.netDir, name)
	require.NoError(f.t, os.WriteFile(p, []byte(data), 0o644))
	return p
}

// run runs catenactl with the fixture's --conf and --cni-path before args.
func (f *fixture) run(args ...string) (stdout, stderr string, code int) {
	return f.runRaw(append([]string{"--conf", f.confPath, "--cni-path", f.cniDir}, args...)...)
}

// runRaw runs catenactl with args only; the default config dir is netDir.
func (f *fixture) runRaw(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(args, env{
		stdout: &out, stderr: &errOut,
		getenv:   func(string) string { return "" },
		now:      func() time.Time { return f.now },
		netDir:   f.netDir,
		ownerUID: os.Geteuid(),
		// never the host's runtime: auto finds only the test's sockets,
		// and the test's kubelet
		runtimeSockets: append([]string{}, f.sockets...),
		kubelet: func() (reconcile.Kubelet, error) {
			if f.kubelet == "" {
				return reconcile.Kubelet{}, errors.New("no kubelet process found")
			}
			return reconcile.Kubelet{Endpoint: f.kubelet, Root: "/nonexistent"}, nil
		},
	})
	return out.String(), errOut.String(), code
}

// calls returns the script plugins' invocations, one "<VERB> <container>"
// per line.
func (f *fixture) calls() []string {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.cniDir, "calls.log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(f.t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// save stores a record of cid on testNet, created age ago, with one step
// per state given (types alternate as in the fixture's config).
func (f *fixture) save(cid, ifname string, phase cache.Phase, age time.Duration, types []string, states ...cache.StepState) *cache.Record {
	f.t.Helper()
	rec := &cache.Record{
		Key:   cache.Key{Network: testNet, ContainerID: cid, IfName: ifname},
		Phase: phase, CNIVersion: "1.1.0", NetNS: "/var/run/netns/" + cid,
		Created: f.now.Add(-age).UTC(),
	}
	for i, st := range states {
		typ := types[i%len(types)]
		conf, err := json.Marshal(map[string]string{"cniVersion": "1.1.0", "name": testNet, "type": typ})
		require.NoError(f.t, err)
		s := cache.Step{Index: i, Type: typ, CNIVersion: "1.1.0", Config: conf, State: st,
			Started: rec.Created, Finished: rec.Created.Add(3 * time.Millisecond)}
		if st == cache.StepDelFailed {
			s.DelAttempts, s.DelError = 1, typ+" fails on purpose"
		}
		rec.Steps = append(rec.Steps, s)
	}
	if phase == cache.PhaseNeedsTeardown {
		rec.TeardownAttempts, rec.LastError = 1, "earlier DEL failed"
	}
	require.NoError(f.t, f.store.Save(rec))
	return rec
}

func (f *fixture) recordExists(cid, ifname string) bool {
	f.t.Helper()
	_, err := f.store.Load(cache.Key{Network: testNet, ContainerID: cid, IfName: ifname})
	if err != nil {
		require.ErrorIs(f.t, err, cache.ErrNotFound)
		return false
	}
	return true
}

// tableRows splits a table into rows of whitespace-separated fields (enough
// for cells without spaces).
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(s), &v), "output: %s", s)
	return v
}

// hasRow reports whether a row of rows starts with prefix.
func hasRow(rows [][]string, prefix ...string) bool {
	return slices.ContainsFunc(rows, func(r []string) bool {
		return len(r) >= len(prefix) && slices.Equal(r[:len(prefix)], prefix)
	})
}
