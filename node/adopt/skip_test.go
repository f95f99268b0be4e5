package adopt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/libcnitest"
	"github.com/catena-cni/catena/libchain/libcnientry"
)

// TestAdoptSkipsWhatItCannotTrust: every file that is not a genuine entry of
// the primary's network is skipped with its reason, writes no record, and
// does not stop the adoption of the genuine one.
func TestAdoptSkipsWhatItCannotTrust(t *testing.T) {
	base := libcnitest.RealEntry(t)
	type fileCase struct {
		name   string
		create func(t *testing.T, path string) // nil: write base changed by mutate
		mutate func(m map[string]any)
		reason string
	}
	cases := []fileCase{
		{name: "other-net-c1-eth0", reason: "not of network k8s-pod-net",
			mutate: func(m map[string]any) { m["networkName"], m["containerId"] = "other-net", "c1" }},
		{name: "k8s-pod-net-b-c1-eth0", reason: `of network "k8s-pod-net-b", not "k8s-pod-net"`,
			mutate: func(m map[string]any) { m["networkName"], m["containerId"] = "k8s-pod-net-b", "c1" }},
		{name: "k8s-pod-net-link-eth0", reason: "is a symlink", create: libcnitest.SymlinkEntry},
		{name: "k8s-pod-net-dir-eth0", reason: "is a directory", create: libcnitest.DirEntry},
		{name: "k8s-pod-net-fifo-eth0", reason: "is not a regular file", create: libcnitest.FifoEntry},
		{name: "k8s-pod-net-big-eth0", reason: "too large", mutate: func(m map[string]any) {
			m["containerId"], m["padding"] = "big", strings.Repeat("x", libcnientry.MaxSize)
		}},
		{name: "k8s-pod-net-junk-eth0", reason: "not a libcni cache entry", create: libcnitest.JunkEntry},
		{name: "k8s-pod-net-legacy-eth0", reason: `kind "" is not "cniCacheV1"`,
			mutate: func(m map[string]any) { delete(m, "kind"); m["containerId"] = "legacy" }},
		{name: "k8s-pod-net-c3-eth0", reason: "file name does not match its content",
			mutate: func(m map[string]any) { m["containerId"] = "c2" }},
		{name: "k8s-pod-net-nores-eth0", reason: "no cached result",
			mutate: func(m map[string]any) { delete(m, "result"); m["containerId"] = "nores" }},
		{name: "k8s-pod-net--bad-eth0", reason: "invalid attachment",
			mutate: func(m map[string]any) { m["containerId"] = "-bad" }},
		{name: "k8s-pod-net-badres-eth0", reason: "cached result",
			mutate: func(m map[string]any) {
				m["result"] = map[string]any{"cniVersion": "9.9.9"}
				m["containerId"] = "badres"
			}},
		{name: "k8s-pod-net-slash-eth0", reason: `type "../bridge" is not a plain binary name`,
			mutate: func(m map[string]any) {
				m["containerId"] = "slash"
				libcnitest.WithConfig(`{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"../bridge"}]}`)(m)
			}},
		{name: "k8s-pod-net-viacatena-eth0", reason: "made through catena",
			mutate: func(m map[string]any) {
				m["containerId"] = "viacatena"
				libcnitest.WithConfig(`{"cniVersion":"1.0.0","name":"k8s-pod-net","plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}`)(m)
			}},
		{name: "k8s-pod-net-noplugins-eth0", reason: "no inline plugins",
			mutate: func(m map[string]any) {
				m["containerId"] = "noplugins"
				libcnitest.WithConfig(`{"cniVersion":"1.0.0","name":"k8s-pod-net"}`)(m)
			}},
		{name: "k8s-pod-net-nularg-eth0", reason: "cached CNI_ARGS hold a NUL byte",
			mutate: func(m map[string]any) {
				m["containerId"], m["cniArgs"] = "nularg", [][2]string{{"K8S_POD_NAME", "a\x00b"}}
			}},
		{name: "k8s-pod-net-nulns-eth0", reason: "cached netns holds a NUL byte",
			mutate: func(m map[string]any) { m["containerId"], m["netns"] = "nulns", "/var/run/netns/a\x00b" }},
		{name: "k8s-pod-net-renamed-eth0", reason: `cached config is of network "elsewhere"`,
			mutate: func(m map[string]any) {
				m["containerId"] = "renamed"
				libcnitest.WithConfig(`{"cniVersion":"1.0.0","name":"elsewhere","plugins":[{"type":"bridge"}]}`)(m)
			}},
	}
	w := newWorld(t)
	require.NoError(t, os.MkdirAll(w.ResultsDir(), 0o700))
	for _, c := range cases {
		path := filepath.Join(w.ResultsDir(), c.name)
		if c.create != nil {
			c.create(t, path)
			continue
		}
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		c.mutate(m)
		require.NoError(t, os.WriteFile(path, libcnitest.EncodeEntry(t, m), 0o600))
	}
	good := "k8s-pod-net-" + libcnitest.TestPod.ContainerID + "-eth0"
	require.NoError(t, os.WriteFile(filepath.Join(w.ResultsDir(), good), libcnitest.EncodeEntry(t, base), 0o600))

	rep, err := w.adopt(t, libcnitest.PrimaryConf)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Adopted)
	assert.Zero(t, rep.AlreadyPresent)
	require.Len(t, rep.Skipped, len(cases), "%q", rep.Skipped)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got string
			for _, s := range rep.Skipped {
				if strings.HasPrefix(s, c.name+": ") {
					got = s
				}
			}
			require.NotEmpty(t, got, "no skip reason for %s in %q", c.name, rep.Skipped)
			assert.Contains(t, got, c.reason)
		})
	}
	keys, err := w.Store.List()
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{{Network: "k8s-pod-net", ContainerID: libcnitest.TestPod.ContainerID, IfName: "eth0"}}, keys)
}
