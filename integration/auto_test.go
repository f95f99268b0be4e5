package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/nodeconf"
)

// debianCNI is where Debian 12's containernetworking-plugins (1.1.1)
// installs the reference plugins; their VERSION answers at most 1.0.0
// (scripts/install-deps.sh installs the package).
const debianCNI = "/usr/lib/cni"

// requireDebianPlugins fails unless Debian's plugins are installed.
func requireDebianPlugins(t *testing.T) {
	t.Helper()
	for _, p := range []string{"bridge", "host-local", "tuning", "portmap"} {
		_, err := os.Stat(filepath.Join(debianCNI, p))
		require.NoError(t, err, "Debian's %s missing: apt-get install containernetworking-plugins (scripts/install-deps.sh does)", p)
	}
}

// cniDirOf is a private CNI dir for w: catena and the test plugins of
// cniPath, and each named plugin linked from the dir given for it.
func (w *world) cniDirOf(from map[string]string) string {
	w.t.Helper()
	dir := w.t.TempDir()
	for _, p := range []string{"catena", "failer"} {
		require.NoError(w.t, os.Symlink(filepath.Join(cniPath, p), filepath.Join(dir, p)))
	}
	for p, src := range from {
		require.NoError(w.t, os.Symlink(filepath.Join(src, p), filepath.Join(dir, p)))
	}
	return dir
}

// autoVersion gives a delegate's JSON object "cniVersion": "auto".
func autoVersion(delegate string) string {
	return `{"cniVersion":"auto",` + strings.TrimPrefix(strings.TrimSpace(delegate), "{")
}

// stepVersions are the versions a record's steps were called at, and
// those of their results.
func stepVersions(t *testing.T, rec string) (called, answered []string) {
	t.Helper()
	for _, s := range readRecord(t, rec)["steps"].([]any) {
		step := s.(map[string]any)
		called = append(called, step["cniVersion"].(string))
		raw, err := json.Marshal(step["result"])
		require.NoError(t, err)
		v, err := create.DecodeVersion(raw)
		require.NoError(t, err)
		answered = append(answered, v)
	}
	return called, answered
}

// versionCalls are the VERSION calls the event journal of cacheDir holds.
func versionCalls(t *testing.T, cacheDir string) []events.OpCall {
	t.Helper()
	ops, _, err := events.Read(afero.NewOsFs(), cacheDir, time.Time{})
	require.NoError(t, err)
	var calls []events.OpCall
	for _, op := range ops {
		for _, c := range op.Calls {
			if c.Verb == "VERSION" {
				calls = append(calls, c)
			}
		}
	}
	return calls
}

// checkPortmap checks a CHECK's outcome: none, but with Debian's portmap
// (1.1.1), whose CHECK fails on a host with ip6tables for a container with
// no IPv6 ("could not check ipv6 dnat: chain ... not found"; fixed
// upstream since), its error, from portmap itself: catena reached it at
// 1.0.0 with a prevResult it accepted. TestDebianPortmapCheck shows the
// same error without catena.
func checkPortmap(t *testing.T, err error, portmapDir string) {
	t.Helper()
	if portmapDir != debianCNI {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(portmap) CHECK failed: could not check ipv6 dnat: chain CNI-DN-")
}

// TestDebianPortmapCheck: Debian 12's portmap fails CHECK here as a plain
// 1.0.0 conflist's last plugin too, without catena (see checkPortmap).
func TestDebianPortmapCheck(t *testing.T) {
	requireDebianPlugins(t)
	w := newWorld(t)
	dir := w.cniDirOf(map[string]string{"bridge": debianCNI, "host-local": debianCNI, "portmap": debianCNI})
	rtm := libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(t.TempDir(), "libcni"), nil)
	list := w.plainList("plain-"+w.id, "1.0.0", w.bridgeDelegate(), portmapDelegate)
	rt := w.rt(w.id+"-p", portMapping(int(hostPort())))
	_, err := rtm.AddNetworkList(bg, list, rt)
	require.NoError(t, err)
	err = rtm.CheckNetworkList(bg, list, rt)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "could not check ipv6 dnat: chain CNI-DN-")
	require.NoError(t, rtm.DelNetworkList(bg, list, rt))
	assert.Zero(t, iptablesMentions(t, rt.ContainerID))
}

const autoTuning = `{"type":"tuning","sysctl":{"net.core.somaxconn":"1024"}}`

// TestAutoVersions: a 1.1.0 catena conflist over delegates whose
// cniVersion is "auto", with real plugins in a real netns. Each delegate
// is called at the highest version its binary and catena share, prevResult
// converted down to it (the reference plugins refuse a prevResult of any
// other version than their config's) and its result back up; the ADD's
// result, CHECK, STATUS, GC and DEL are 1.1.0 to the runtime. Each
// binary's VERSION runs once: the next calls read the cache. The same
// chain with the delegates inheriting 1.1.0 (no auto) fails on Debian's
// plugins with their code 1, as it did before auto.
func TestAutoVersions(t *testing.T) {
	requireDebianPlugins(t)
	for _, tc := range []struct {
		name   string
		from   map[string]string
		called []string // bridge, tuning, portmap
	}{
		{name: "debian 12 plugins, at most 1.0.0",
			from:   map[string]string{"bridge": debianCNI, "host-local": debianCNI, "tuning": debianCNI, "portmap": debianCNI},
			called: []string{"1.0.0", "1.0.0", "1.0.0"}},
		{name: "built 1.1.0 bridge, debian tuning and portmap",
			from:   map[string]string{"bridge": cniPath, "host-local": cniPath, "tuning": debianCNI, "portmap": debianCNI},
			called: []string{"1.1.0", "1.0.0", "1.0.0"}},
		{name: "built plugins, 1.1.0",
			from:   map[string]string{"bridge": cniPath, "host-local": cniPath, "tuning": cniPath, "portmap": cniPath},
			called: []string{"1.1.0", "1.1.0", "1.1.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			dir := w.cniDirOf(tc.from)
			rtm := libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(t.TempDir(), "libcni"), nil)
			net := "auto-" + w.id
			port := hostPort()
			rt := w.rt(w.id+"-a", portMapping(int(port)))

			if tc.called[1] != "1.1.0" {
				// Before auto: the delegates inherit catena's 1.1.0.
				pinned := w.catenaList(net, "1.1.0", w.bridgeDelegate(), autoTuning, portmapDelegate)
				_, err := rtm.AddNetworkList(bg, pinned, rt)
				var cniErr *types.Error
				require.True(t, errors.As(err, &cniErr), "a CNI error: %v", err)
				assert.Equal(t, uint(types.ErrIncompatibleCNIVersion), cniErr.Code, "%v", err)
				first := "delegate 1 (tuning) ADD failed"
				if tc.called[0] != "1.1.0" {
					first = "delegate 0 (bridge) ADD failed"
				}
				assert.Contains(t, err.Error(), first)
				t.Logf("inheriting 1.1.0: %v", err)
				require.NoError(t, rtm.DelNetworkList(bg, pinned, rt))
				assert.Empty(t, w.ipamFiles(net))
				assert.Empty(t, w.records(net))
			}

			list := w.catenaList(net, "1.1.0", autoVersion(w.bridgeDelegate()), autoVersion(autoTuning), autoVersion(portmapDelegate))
			// STATUS twice: the first asks each binary VERSION, the second
			// reads the cache.
			start := time.Now()
			require.NoError(t, rtm.GetStatusNetworkList(bg, list))
			cold := time.Since(start)
			start = time.Now()
			require.NoError(t, rtm.GetStatusNetworkList(bg, list))
			warm := time.Since(start)
			probes := versionCalls(t, w.cacheDir)
			require.Len(t, probes, 3, "one VERSION per binary: %v", probes)
			var probeTimes []string
			for _, c := range probes {
				probeTimes = append(probeTimes, fmt.Sprintf("%s %s", c.Type, c.Duration))
			}
			t.Logf("STATUS through catena: cold (3 VERSION) %s, warm (cached) %s; VERSION calls: %s", cold, warm, strings.Join(probeTimes, ", "))
			cached, err := filepath.Glob(filepath.Join(w.cacheDir, "versions", "*.json"))
			require.NoError(t, err)
			require.Len(t, cached, 3)
			for _, f := range cached {
				fi, err := os.Stat(f)
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
			}

			res, err := rtm.AddNetworkList(bg, list, rt)
			require.NoError(t, err)
			assert.Equal(t, "1.1.0", res.Version())
			raw, err := json.Marshal(res)
			require.NoError(t, err)
			assert.Contains(t, string(raw), w.ipamFiles(net)[0], "the result carries host-local's IP")
			assert.Equal(t, "1024\n", run(t, "ip", "netns", "exec", filepath.Base(w.netns), "cat", "/proc/sys/net/core/somaxconn"), "tuning ran")
			assert.Positive(t, iptablesMentions(t, rt.ContainerID), "portmap ran")
			recs := w.records(net)
			require.Len(t, recs, 1)
			called, answered := stepVersions(t, recs[0])
			assert.Equal(t, tc.called, called)
			assert.Equal(t, tc.called, answered, "each answered in the version it was called at")
			assert.Len(t, versionCalls(t, w.cacheDir), 3, "the ADD asked no VERSION: cached")

			checkPortmap(t, rtm.CheckNetworkList(bg, list, rt), tc.from["portmap"])
			require.NoError(t, rtm.GCNetworkList(bg, list, valid(rt)))
			require.Len(t, w.records(net), 1, "GC keeps the valid attachment")

			// The binaries' answers are forgotten: DEL uses the versions
			// the ADD recorded, and asks nothing.
			require.NoError(t, os.RemoveAll(filepath.Join(w.cacheDir, "versions")))
			require.NoError(t, rtm.DelNetworkList(bg, list, rt))
			assert.Len(t, versionCalls(t, w.cacheDir), 3, "DEL asked no VERSION")
			assert.Empty(t, w.ipamFiles(net))
			assert.Empty(t, w.hostVeths())
			assert.Zero(t, iptablesMentions(t, rt.ContainerID))
			assert.Empty(t, w.records(net))
		})
	}
}

// liar answers VERSION with 1.1.0 among its versions, then refuses ADD at
// 1.1.0 with code 1, as a plugin whose VERSION lies does.
const liar = `#!/bin/sh
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.1.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]}' ;;
ADD) echo '{"code":1,"msg":"incompatible CNI versions","details":"config is \"1.1.0\", plugin supports [\"0.4.0\" \"1.0.0\"]"}'; exit 1 ;;
esac
`

// TestAutoVersionLiar: a delegate whose VERSION claims 1.1.0 and whose ADD
// then refuses it fails the ADD with code 1 saying so and naming it; the
// chain is rolled back and its claim is not kept.
func TestAutoVersionLiar(t *testing.T) {
	w := newWorld(t)
	dir := w.cniDirOf(map[string]string{"bridge": cniPath, "host-local": cniPath})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "liar"), []byte(liar), 0o755))
	rtm := libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(t.TempDir(), "libcni"), nil)
	net := "liar-" + w.id
	list := w.catenaList(net, "1.1.0", autoVersion(w.bridgeDelegate()), `{"type":"liar","cniVersion":"auto"}`)
	rt := w.rt(w.id+"-l", nil)
	_, err := rtm.AddNetworkList(bg, list, rt)
	var cniErr *types.Error
	require.True(t, errors.As(err, &cniErr), "a CNI error: %v", err)
	assert.Equal(t, uint(types.ErrIncompatibleCNIVersion), cniErr.Code)
	assert.Contains(t, err.Error(), "delegate 1 (liar) ADD failed: liar refused version 1.1.0, which its VERSION ("+filepath.Join(dir, "liar")+") claims")
	assert.Contains(t, err.Error(), "rolled back")
	t.Logf("%v", err)
	assert.Empty(t, w.ipamFiles(net))
	assert.Empty(t, w.hostVeths())
	cached, err := filepath.Glob(filepath.Join(w.cacheDir, "versions", "*.json"))
	require.NoError(t, err)
	assert.Len(t, cached, 1, "bridge's answer kept, the liar's dropped")
	require.NoError(t, rtm.DelNetworkList(bg, list, rt))
	assert.Empty(t, w.records(net))
}

// TestAutoFlannelWrapped: kube-flannel's 0.3.1 conflist [flannel, portmap]
// wrapped by the agent with --delegate-versions auto (its default) loads
// at 1.1.0 in a libcni that knows cniVersions, so the runtime sends
// catena STATUS and GC; flannel is called at what its binary supports and
// Debian's portmap at 1.0.0. With primary the file stays 0.3.1.
func TestAutoFlannelWrapped(t *testing.T) {
	requireDebianPlugins(t)
	w := newWorld(t)
	f := flannelIn(t, w, "flannel-"+w.id)
	dir := w.cniDirOf(map[string]string{"flannel": cniPath, "bridge": cniPath, "host-local": cniPath, "portmap": debianCNI})
	rtm := libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(t.TempDir(), "libcni"), nil)
	p, err := nodeconf.ParsePrimary("10-flannel.conflist", []byte(f.conflist()))
	require.NoError(t, err)

	plainOut, err := nodeconf.Wrap(p, nodeconf.CatenaOptions{CacheDir: w.cacheDir, DelegateVersions: nodeconf.DelegateVersionsPrimary})
	require.NoError(t, err)
	plain, err := libcni.ConfListFromBytes(plainOut)
	require.NoError(t, err)
	assert.Equal(t, "0.3.1", plain.CNIVersion, "primary: the runtime calls catena at 0.3.1, so never STATUS or GC")

	out, err := nodeconf.Wrap(p, nodeconf.CatenaOptions{CacheDir: w.cacheDir, DelegateTimeout: 20 * time.Second, DelegateVersions: nodeconf.DelegateVersionsAuto})
	require.NoError(t, err)
	list, err := libcni.ConfListFromBytes(out)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", list.CNIVersion)
	rt := w.rt(w.id+"-f", portMapping(int(hostPort())))

	res, err := rtm.AddNetworkList(bg, list, rt)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", res.Version())
	recs := w.records(f.net)
	require.Len(t, recs, 1)
	called, answered := stepVersions(t, recs[0])
	assert.Equal(t, []string{"1.1.0", "1.0.0"}, called, "flannel v1.9.1 at 1.1.0, Debian's portmap at 1.0.0")
	assert.Equal(t, called, answered)
	assert.Len(t, f.ips(), 1)
	assert.Len(t, f.cacheFiles(), 1, "flannel cached its delegate config")
	assert.Positive(t, iptablesMentions(t, rt.ContainerID), "portmap ran")

	checkPortmap(t, rtm.CheckNetworkList(bg, list, rt), debianCNI)
	require.NoError(t, rtm.GetStatusNetworkList(bg, list))
	require.NoError(t, rtm.GCNetworkList(bg, list, valid(rt)))
	require.NoError(t, rtm.DelNetworkList(bg, list, rt))
	assert.Equal(t, flannelHeld{}, f.held(w.cacheDir))
	assert.Zero(t, iptablesMentions(t, rt.ContainerID))
}
