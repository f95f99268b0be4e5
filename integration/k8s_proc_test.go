package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// daemon is one background process of the cluster, logging to its own
// file, stopped by PID.
type daemon struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startDaemon starts bin with args, logging to logDir/name.log. It is never
// stopped implicitly: the cluster's teardown stops its daemons in order.
func startDaemon(t *testing.T, logDir, name, bin string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, name: name, log: filepath.Join(logDir, name+".log"), exited: make(chan struct{})}
	logf, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer func() { _ = logf.Close() }()
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	require.NoError(t, d.cmd.Start(), "starting %s", name)
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	return d
}

// running tells whether the process has not exited.
func (d *daemon) running() bool {
	if d == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and, after grace, SIGKILL; it waits for the exit.
func (d *daemon) stop(grace time.Duration) {
	if !d.running() {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(grace):
		d.t.Logf("teardown: %s (pid %d) ignored SIGTERM for %s; killing it", d.name, d.cmd.Process.Pid, grace)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// logTail is the end of the daemon's log, for failure messages.
func (d *daemon) logTail() string {
	raw, err := os.ReadFile(d.log)
	if err != nil {
		return fmt.Sprintf("(no %s log: %v)", d.name, err)
	}
	const max = 4000
	if len(raw) > max {
		raw = raw[len(raw)-max:]
	}
	return d.name + " log (tail):\n" + string(raw)
}

// waitFor polls cond every interval until it holds, for up to limit; it
// fails the test with the last error and the logs of daemons when it does
// not, or as soon as one of them exits.
func waitFor(t *testing.T, what string, limit, interval time.Duration, cond func() error, daemons ...*daemon) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		for _, d := range daemons {
			if !d.running() {
				t.Fatalf("%s exited (%v) while waiting until %s: %v\n%s", d.name, d.cmd.ProcessState, what, err, d.logTail())
			}
		}
		if time.Since(start) > limit {
			msg := ""
			for _, d := range daemons {
				msg += "\n" + d.logTail()
			}
			t.Fatalf("timed out after %s waiting until %s: %v%s", limit, what, err, msg)
		}
		time.Sleep(interval)
	}
}

// freePort is a TCP port free on 127.0.0.1 right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// advertiseIP is the host's source address towards the default route,
// which the API server publishes (it must not be loopback) but nothing
// dials. A route lookup sends no packet.
func advertiseIP(t *testing.T) net.IP {
	t.Helper()
	routes, err := netlink.RouteGet(net.IPv4(192, 0, 2, 1)) // TEST-NET-1, never dialled
	require.NoError(t, err, "the API server needs a non-loopback address to advertise")
	require.NotEmpty(t, routes)
	require.NotNil(t, routes[0].Src, "no source address towards the default route")
	return routes[0].Src.To4()
}
