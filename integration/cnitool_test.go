package integration

import (
	"crypto/sha512"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cnitoolRun runs the pinned cnitool (installed by `make plugins` into
// bin/) against one conflist, like a person would: NETCONFPATH, CNI_PATH
// and CAP_ARGS in the environment, the network name and netns as arguments.
type cnitoolRun struct {
	t       *testing.T
	bin     string
	confDir string
	capArgs string
}

func (w *world) cnitool(network string, conflist []byte, capArgs string) *cnitoolRun {
	w.t.Helper()
	binDir := os.Getenv("CATENA_BIN")
	if binDir == "" {
		binDir = filepath.Join(repoRoot(), "bin")
	}
	bin := filepath.Join(binDir, "cnitool")
	_, err := os.Stat(bin)
	require.NoError(w.t, err, "cnitool missing (run `make plugins`)")
	c := &cnitoolRun{t: w.t, bin: bin, confDir: w.t.TempDir(), capArgs: capArgs}
	writeAtomic(w.t, filepath.Join(c.confDir, "10-catena-it.conflist"), conflist)
	// cnitool caches in libcni's default dir: remove this network's entries
	w.t.Cleanup(func() {
		m, _ := filepath.Glob(filepath.Join(libcniResults, network+"-*"))
		for _, p := range m {
			_ = os.Remove(p)
		}
	})
	return c
}

// run runs `cnitool <verb> <network> <netns>` and returns its stdout, and
// an error carrying its stderr.
func (c *cnitoolRun) run(verb, network, netns string) (string, error) {
	cmd := exec.Command(c.bin, verb, network, netns)
	cmd.Env = append(os.Environ(), "NETCONFPATH="+c.confDir, "CNI_PATH="+cniPath, "CAP_ARGS="+c.capArgs)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("cnitool %s: %w: %s", verb, err, stderr.String())
	}
	return stdout.String(), nil
}

// cnitoolContainerID is the container ID cnitool derives from the netns.
func cnitoolContainerID(netns string) string {
	s := sha512.Sum512([]byte(netns))
	return fmt.Sprintf("cnitool-%x", s[:10])
}

// TestCnitoolAgainstCatena drives Catena with cnitool's add, check, status,
// del and gc: Catena alone in a conflist, and Catena first with portmap
// after it, which can only add its DNAT rule if the outer chain passed it
// Catena's result as prevResult.
func TestCnitoolAgainstCatena(t *testing.T) {
	for _, tc := range []struct {
		name      string
		after     string // plugin after catena in the conflist, if any
		delegates func(w *world) []string
	}{
		{"catena alone", "", func(w *world) []string { return []string{w.bridgeDelegate(), portmapDelegate} }},
		{"catena then portmap", portmapDelegate, func(w *world) []string { return []string{w.bridgeDelegate()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			net := "cnitool-" + w.id
			list := w.catenaList(net, "1.1.0", tc.delegates(w)...)
			conflist := list.Bytes
			if tc.after != "" {
				conflist = []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[%s,%s]}`,
					net, list.Plugins[0].Bytes, tc.after))
			}
			port := hostPort()
			c := w.cnitool(net, conflist, fmt.Sprintf(`{"portMappings":[{"hostPort":%d,"containerPort":80,"protocol":"tcp"}]}`, port))
			id := cnitoolContainerID(w.netns)

			out, err := c.run("add", net, w.netns)
			require.NoError(t, err)
			res, err := current.NewResult([]byte(out))
			require.NoError(t, err, "cnitool prints a 1.1.0 result: %s", out)
			r := res.(*current.Result)
			require.Len(t, r.IPs, 1)
			ip := r.IPs[0].Address.IP.String()
			assert.Equal(t, []string{ip}, w.ipamFiles(net))
			assert.Equal(t, []string{r.IPs[0].Address.String()}, w.sandboxAddrs("eth0"))
			assert.Contains(t, run(t, "iptables-save", "-t", "nat"), fmt.Sprintf("--to-destination %s:80", ip),
				"portmap got Catena's result (prevResult) and DNATs to its IP")
			recs := w.records(net)
			require.Len(t, recs, 1)
			assert.Contains(t, recs[0], id)

			_, err = c.run("check", net, w.netns)
			require.NoError(t, err)
			_, err = c.run("status", net, w.netns)
			require.NoError(t, err)

			_, err = c.run("del", net, w.netns)
			require.NoError(t, err)
			assertNothingHeld(t, w, net, id)
			_, err = c.run("del", net, w.netns)
			require.NoError(t, err, "a second del is fine")

			// cnitool gc: libcni DELs every attachment it cached (no valid
			// list), then sends GC without cni.dev/valid-attachments, which
			// Catena refuses (code 7) rather than read as "nothing is valid"
			_, err = c.run("add", net, w.netns)
			require.NoError(t, err)
			require.Len(t, w.ipamFiles(net), 1)
			_, err = c.run("gc", net, w.netns)
			require.ErrorContains(t, err, "cni.dev/valid-attachments")
			assertNothingHeld(t, w, net, id)
		})
	}
}

// assertNothingHeld: no IP, address, veth, iptables rule or record of the
// attachment is left.
func assertNothingHeld(t *testing.T, w *world, net, id string) {
	t.Helper()
	assert.Empty(t, w.ipamFiles(net), "IPs")
	assert.Empty(t, w.sandboxAddrs("eth0"), "addresses")
	assert.Empty(t, w.hostVeths(), "veths")
	assert.Zero(t, iptablesMentions(t, id), "iptables rules")
	assert.Empty(t, w.records(net), "records")
}
