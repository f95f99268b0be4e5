package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const portmapDelegate = `{"type":"portmap","capabilities":{"portMappings":true},"snat":true}`
const tuningDelegate = `{"type":"tuning","sysctl":{"net.core.somaxconn":"512"}}`

func portMapping(port int) map[string]any {
	return map[string]any{"portMappings": []map[string]any{{"hostPort": port, "containerPort": 80, "protocol": "tcp"}}}
}

// TestRealChainAddCheckDel runs [bridge + host-local, portmap, tuning] through
// catena: ADD gives the netns an address; DEL leaves no veth, no host-local
// file, no iptables rule and no record.
func TestRealChainAddCheckDel(t *testing.T) {
	w := newWorld(t)
	const net = "itchain"
	list := w.catenaList(net, "1.1.0", w.bridgeDelegate(), portmapDelegate, tuningDelegate)
	container := w.id + "-c"
	rt := w.rt(container, portMapping(20000+int(seq.Load())))

	res, err := w.cni.AddNetworkList(bg, list, rt)
	require.NoError(t, err)
	r, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Len(t, r.IPs, 1)
	assert.Equal(t, "1.1.0", r.CNIVersion)
	assert.Equal(t, []string{r.IPs[0].Address.String()}, w.sandboxAddrs("eth0"))
	assert.Len(t, w.ipamFiles(net), 1)
	assert.Len(t, w.hostVeths(), 1)
	assert.Positive(t, iptablesMentions(t, container), "portmap rules for the container")
	recs := w.records(net)
	require.Len(t, recs, 1)
	rec := readRecord(t, recs[0])
	assert.Equal(t, "complete", rec["phase"])
	info, err := os.Stat(recs[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	dinfo, err := os.Stat(filepath.Dir(recs[0]))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dinfo.Mode().Perm())
	somax := run(t, "ip", "netns", "exec", w.id, "cat", "/proc/sys/net/core/somaxconn")
	assert.Equal(t, "512\n", somax)

	require.NoError(t, w.cni.CheckNetworkList(bg, list, rt))

	require.NoError(t, w.cni.DelNetworkList(bg, list, rt))
	assert.Empty(t, w.sandboxAddrs("eth0"))
	assert.Empty(t, w.ipamFiles(net))
	assert.Empty(t, w.hostVeths())
	assert.Zero(t, iptablesMentions(t, container))
	assert.Empty(t, w.records(net))

	// DEL twice, and without a netns, is fine and invokes nothing
	rt.NetNS = ""
	require.NoError(t, w.cni.DelNetworkList(bg, list, rt))
}

// failer returns the test plugin's config.
func failer(fields string) string {
	if fields == "" {
		return `{"type":"failer"}`
	}
	return fmt.Sprintf(`{"type":"failer",%s}`, fields)
}

// TestLeakCatenaVersusPlainConflist is containerd issue 12130: the second
// plugin fails ADD and DEL. A runtime ADDs, sees the failure, DELs. Plain
// libcni leaks one IP per attempt; catena leaks none. Both in one test.
func TestLeakCatenaVersusPlainConflist(t *testing.T) {
	const attempts = 10
	w := newWorld(t)
	bad := failer(`"failAdd":true,"failDel":true`)
	cases := []struct {
		name, network string
		wantLeaked    int
	}{
		{"catena", "itleakcat", 0},
		{"plain libcni", "itleakplain", attempts},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			list := w.plainList(tc.network, "1.0.0", w.bridgeDelegate(), bad)
			if tc.name == "catena" {
				list = w.catenaList(tc.network, "1.0.0", w.bridgeDelegate(), bad)
			}
			addFailures, delFailures := 0, 0
			for i := 0; i < attempts; i++ {
				// like a runtime, every attempt gets a fresh sandbox netns
				container := fmt.Sprintf("%s-%s-%d", w.id, tc.network, i)
				rt := w.rt(container, nil)
				rt.NetNS = w.addNetns(container)
				if _, err := w.cni.AddNetworkList(bg, list, rt); err != nil {
					addFailures++
				}
				if err := w.cni.DelNetworkList(bg, list, rt); err != nil {
					delFailures++
				}
			}
			t.Logf("%s: %d attempts, %d ADD failures, %d DEL failures, %d IPs leaked",
				tc.name, attempts, addFailures, delFailures, len(w.ipamFiles(tc.network)))
			assert.Equal(t, attempts, addFailures)
			assert.Len(t, w.ipamFiles(tc.network), tc.wantLeaked)
			if tc.name == "catena" {
				assert.Zero(t, delFailures)
				assert.Empty(t, w.records(tc.network))
			} else {
				assert.Equal(t, attempts, delFailures)
			}
		})
	}
}

// TestPartialRollbackHeldUntilFaultLifted: the rollback DEL of a middle
// delegate fails. The IP stays held and recorded; a later DEL, after the
// fault is lifted, releases it.
func TestPartialRollbackHeldUntilFaultLifted(t *testing.T) {
	w := newWorld(t)
	const net = "itpartial"
	fault := filepath.Join(t.TempDir(), "fault")
	f, err := os.Create(fault)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	list := w.catenaList(net, "1.0.0", w.bridgeDelegate(),
		failer(fmt.Sprintf(`"failDel":true,"faultFile":%q`, fault)),
		failer(`"failAdd":true`))
	rt := w.rt(w.id+"-p", nil)

	_, err = w.cni.AddNetworkList(bg, list, rt)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "delegate 2 (failer) ADD failed")
	assert.Contains(t, err.Error(), "rollback incomplete")
	assert.Contains(t, err.Error(), "delegate 1 (failer) DEL failed")
	assert.Len(t, w.ipamFiles(net), 1, "the IP stays held")
	recs := w.records(net)
	require.Len(t, recs, 1)
	assert.Equal(t, "needs-teardown", readRecord(t, recs[0])["phase"])

	// DEL while the fault holds: fails, still held and recorded
	err = w.cni.DelNetworkList(bg, list, rt)
	require.Error(t, err)
	assert.Len(t, w.ipamFiles(net), 1)
	assert.Len(t, w.records(net), 1)

	require.NoError(t, os.Remove(fault))
	require.NoError(t, w.cni.DelNetworkList(bg, list, rt))
	assert.Empty(t, w.ipamFiles(net))
	assert.Empty(t, w.hostVeths())
	assert.Empty(t, w.records(net))
}
