package integration

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
)

// listenIn listens on addr inside the netns at path (the socket stays in
// that netns) and answers every connection with reply; closed at cleanup.
func listenIn(t *testing.T, path, addr, reply string) {
	t.Helper()
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// A thread left in the pod's netns is not unlocked: it exits with
		// this goroutine.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer func() { _ = orig.Close() }()
		target, err := netns.GetFromPath(path)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer func() { _ = target.Close() }()
		if err := netns.Set(target); err != nil {
			ch <- result{err: err}
			return
		}
		l, err := net.Listen("tcp", addr)
		if err := netns.Set(orig); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	require.NoError(t, r.err, "listening on %s in %s", addr, path)
	t.Cleanup(func() { _ = r.l.Close() })
	go func() {
		for {
			conn, err := r.l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, reply)
			_ = conn.Close()
		}
	}()
}

// dial reads what the server at addr answers.
func dial(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(conn)
	return string(b), err
}

// iptablesLines is the iptables-save lines (all tables) that contain every
// one of words.
func iptablesLines(t *testing.T, words ...string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(run(t, "iptables-save"), "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// localnetTo lets connections to 127.0.0.1 be DNATed out of the world's
// bridge (route_localnet), their source masqueraded so that the pod can
// answer, as CRI-O's own CI sets up a node; undone at cleanup (the
// sysctl goes with the bridge).
func (w *world) localnetTo() {
	w.t.Helper()
	run(w.t, "sysctl", "-qw", "net.ipv4.conf."+w.bridge+".route_localnet=1")
	rule := []string{"POSTROUTING", "-t", "nat", "-s", "127.0.0.0/8", "-o", w.bridge, "-j", "MASQUERADE",
		"-m", "comment", "--comment", "catena-it " + w.id}
	run(w.t, "iptables", append([]string{"-A"}, rule...)...)
	w.t.Cleanup(func() { _ = exec.Command("iptables", append([]string{"-D"}, rule...)...).Run() })
}

// TestCRIOHostPortsAreCRIOs: CRI-O maps a sandbox's hostPorts itself
// (iptables DNAT to the pod IP) and gives CNI no portMappings, so portmap,
// in Catena's chain with the portMappings capability, idles: no CNI-HOSTPORT
// rule names the sandbox. The mapped port answers from the pod's netns,
// on the bridge's address and on 127.0.0.1; Stop removes CRI-O's rules,
// and Remove leaves no IP, veth, record or rule.
func TestCRIOHostPortsAreCRIOs(t *testing.T) {
	w := newWorld(t)
	net := "criohp-" + w.id
	c := startCRIO(t, w, string(w.catenaList(net, "1.1.0", w.bridgeDelegate(), portmapDelegate).Bytes))
	c.waitNetworkReady()
	port := hostPort()
	id := c.mustRunPod("hostport", port)
	_, ip, netnsPath, err := c.podStatus(id)
	require.NoError(t, err)
	require.NotEmpty(t, netnsPath, "CRI-O's verbose status names the sandbox's netns")
	assert.Equal(t, []string{ip}, w.ipamFiles(net))
	assert.Len(t, w.hostVeths(), 1)
	recs := w.records(net)
	require.Len(t, recs, 1)
	rec := readRecord(t, recs[0])
	assert.Equal(t, "complete", rec["phase"])

	// CRI-O's rules: KUBE-HOSTPORTS -> KUBE-HP-<hash> (DNAT), and
	// CRIO-HOSTPORTS-MASQ for hairpin, each commented "<pod> hostport <port>"
	mine := fmt.Sprintf("hostport %d", port)
	assert.NotEmpty(t, iptablesLines(t, mine, "DNAT", ip+":80"), "CRI-O's DNAT of hostPort %d to the pod", port)
	assert.NotEmpty(t, iptablesLines(t, "-A KUBE-HOSTPORTS", mine))
	assert.Empty(t, iptablesLines(t, "CNI-", id), "portmap added no rule for the sandbox: CRI-O sent it no portMappings")
	steps, _ := rec["steps"].([]any)
	require.Len(t, steps, 2)
	portmap, _ := steps[1].(map[string]any)["config"].(map[string]any)
	require.Equal(t, "portmap", portmap["type"])
	assert.Nil(t, portmap["runtimeConfig"], "portmap was called with no runtimeConfig")

	listenIn(t, netnsPath, ":80", "hello from "+id[:12])
	gw := strings.TrimSuffix(w.subnet, "0/24") + "1"
	got, err := dial(fmt.Sprintf("%s:%d", gw, port))
	require.NoError(t, err, "hostPort %d on the bridge's address %s", port, gw)
	assert.Equal(t, "hello from "+id[:12], got)
	w.localnetTo()
	got, err = dial(fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err, "hostPort %d on 127.0.0.1", port)
	assert.Equal(t, "hello from "+id[:12], got)

	require.NoError(t, c.stopPod(id), c.logTail())
	assert.Empty(t, iptablesLines(t, mine), "Stop removed CRI-O's rules")
	_, err = dial(fmt.Sprintf("%s:%d", gw, port))
	assert.Error(t, err, "nothing answers on the hostPort")
	require.NoError(t, c.removePod(id), c.logTail())
	assert.Empty(t, w.ipamFiles(net))
	assert.Empty(t, w.hostVeths())
	assert.Empty(t, w.records(net))
	assert.Empty(t, iptablesLines(t, ip+"/"), "no rule names the pod's IP")
	assert.Empty(t, iptablesLines(t, ip+":"))
	assert.Empty(t, c.netnsMounts())
}
