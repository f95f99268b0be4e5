package integration

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// libcniResults is where libcni (inside containerd's go-cni, and cnitool)
// caches its results: shared by the whole host, so tests remove only theirs.
const libcniResults = "/var/lib/cni/results"

// containerd is one private containerd daemon with its CRI plugin: its own
// root, state, sockets, runc root, shim sockets and CNI conf_dir.
type containerd struct {
	t       *testing.T
	version containerdVersion
	dir     string // short: unix socket paths must fit in 108 bytes
	sock    string
	confDir string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	rt      cri.RuntimeServiceClient
	images  cri.ImageServiceClient
}

// startContainerd starts a private containerd of version v in the
// background, with conflist (may be empty) in its conf_dir, the pause image
// imported, and a CRI client ready. Cleanup removes every sandbox, stops
// containerd by PID, kills its leftover shims, unmounts and removes its dirs.
// Failing to start is a test failure with containerd's log, never a skip.
func startContainerd(t *testing.T, v containerdVersion, conflist string) *containerd {
	t.Helper()
	return startContainerdWithBin(t, v, cniPath, conflist)
}

// startContainerdWithBin is startContainerd with binDir as the CNI bin dir.
func startContainerdWithBin(t *testing.T, v containerdVersion, binDir, conflist string) *containerd {
	t.Helper()
	requireRoot(t)
	v.requireBinaries(t)
	dir, err := os.MkdirTemp("", "ctd")
	require.NoError(t, err)
	d := &containerd{t: t, version: v, dir: dir, sock: filepath.Join(dir, "c.sock"),
		confDir: filepath.Join(dir, "net.d"), logPath: filepath.Join(dir, "containerd.log"), exited: make(chan struct{})}
	t.Cleanup(d.removeDir)
	require.NoError(t, os.MkdirAll(d.confDir, 0o755))
	if conflist != "" {
		writeAtomic(t, filepath.Join(d.confDir, "10-catena-it.conflist"), []byte(conflist))
	}
	cfg := filepath.Join(dir, "config.toml")
	writeAtomic(t, cfg, []byte(v.config(dir, binDir, d.confDir)))
	image := buildPauseImage(t, dir)

	logf, err := os.Create(d.logPath)
	require.NoError(t, err)
	defer func() { _ = logf.Close() }()
	d.cmd = exec.Command(v.bin, "--config", cfg, "--log-level", "info")
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	require.NoError(t, d.cmd.Start(), "starting containerd %s", v.name)
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.stop)

	conn, err := grpc.NewClient("unix://"+d.sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(callTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	d.rt, d.images = cri.NewRuntimeServiceClient(conn), cri.NewImageServiceClient(conn)
	d.waitReady()
	ver, err := d.rt.Version(bg, &cri.VersionRequest{})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(strings.TrimPrefix(ver.RuntimeVersion, "v"), v.name+"."),
		"%s is containerd %s, not %s", v.bin, ver.RuntimeVersion, v.name)

	out, err := exec.Command(v.ctr, "--address", d.sock, "-n", "k8s.io", "images", "import",
		"--snapshotter", "overlayfs", image).CombinedOutput()
	require.NoError(t, err, "importing the pause image into containerd %s: %s\n%s", v.name, out, d.logTail())
	d.eventually("CRI sees the pause image", func() error {
		st, err := d.images.ImageStatus(bg, &cri.ImageStatusRequest{Image: &cri.ImageSpec{Image: pauseImage}})
		if err == nil && st.GetImage() == nil {
			err = fmt.Errorf("image %s not found", pauseImage)
		}
		return err
	})
	return d
}

// waitReady waits until the CRI API answers, or containerd exits.
func (d *containerd) waitReady() {
	d.t.Helper()
	d.eventually("containerd's CRI API answers", func() error {
		_, err := d.rt.Version(bg, &cri.VersionRequest{})
		return err
	})
}

// eventually polls cond every 50ms for up to 60s; it fails the test with the
// last error and containerd's log if cond never holds or containerd exits.
func (d *containerd) eventually(what string, cond func() error) {
	d.t.Helper()
	pollDaemon(d.t, "containerd "+d.version.name, d.exited, d.cmd, d.logTail, what, 60*time.Second, cond)
}

// pollDaemon polls cond every 50ms for up to limit; it fails the test with
// the last error and the daemon's log tail if cond never holds or the
// daemon (name, run by cmd) exits, which closes exited.
func pollDaemon(t *testing.T, name string, exited <-chan struct{}, cmd *exec.Cmd, logTail func() string, what string, limit time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited while waiting until %s (%v): %v\n%s", name, what, cmd.ProcessState, err, logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out waiting until %s: %v\n%s", name, what, err, logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// callTimeout bounds every CRI call.
func callTimeout(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// logTail is the end of containerd's log, for failure messages.
func (d *containerd) logTail() string {
	raw, err := os.ReadFile(d.logPath)
	if err != nil {
		return fmt.Sprintf("(no containerd log: %v)", err)
	}
	const max = 6000
	if len(raw) > max {
		raw = raw[len(raw)-max:]
	}
	return "containerd log (tail):\n" + string(raw)
}

// setConflist atomically replaces the conflist and waits until the CRI
// plugin has loaded network name (containerd reloads conf_dir on change).
func (d *containerd) setConflist(name, conflist string) {
	d.t.Helper()
	writeAtomic(d.t, filepath.Join(d.confDir, "10-catena-it.conflist"), []byte(conflist))
	d.eventually("the CRI plugin loads network "+name, func() error {
		st, err := d.rt.Status(bg, &cri.StatusRequest{Verbose: true})
		if err != nil {
			return err
		}
		if !strings.Contains(st.GetInfo()["cniconfig"], fmt.Sprintf("%q", name)) {
			return fmt.Errorf("network %s not loaded yet", name)
		}
		return nil
	})
}

// stop removes every sandbox left (a failed test may leave some), then
// stops containerd by PID: SIGTERM, SIGKILL after 10s.
func (d *containerd) stop() {
	if list, err := d.rt.ListPodSandbox(bg, &cri.ListPodSandboxRequest{}); err == nil {
		for _, sb := range list.GetItems() {
			if _, err := d.rt.StopPodSandbox(bg, &cri.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				d.t.Logf("cleanup: stop sandbox %s: %v", sb.Id, err)
			}
			if _, err := d.rt.RemovePodSandbox(bg, &cri.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				d.t.Logf("cleanup: remove sandbox %s: %v", sb.Id, err)
			}
		}
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.t.Logf("cleanup: containerd %d ignored SIGTERM; killing it", d.cmd.Process.Pid)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.killShims()
}

// killShims kills, by PID, any shim still serving this daemon (its command
// line names this daemon's private socket).
func (d *containerd) killShims() {
	killByCmdline(d.t, d.sock, "shim")
}

var sandboxIDPattern = regexp.MustCompile(`\b[0-9a-f]{64}\b`)

// removeDir removes what containerd left outside its process: mounts under
// its dir, 1.6 shim sockets under /run/containerd/s, libcni results of its
// sandboxes, and the dir itself.
func (d *containerd) removeDir() {
	raw, _ := os.ReadFile(d.logPath)
	ids := map[string]bool{}
	for _, id := range sandboxIDPattern.FindAllString(string(raw), -1) {
		ids[id] = true
	}
	for id := range ids {
		results, _ := filepath.Glob(filepath.Join(libcniResults, "*-"+id+"-*"))
		for _, r := range results {
			_ = os.Remove(r)
		}
		// The cgroups of its containers: a shim killed above leaves them
		// behind, empty. rmdir removes nothing that still has a process.
		cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*/k8s.io", id))
		for _, cg := range cgroups {
			if err := syscall.Rmdir(cg); err != nil && !errors.Is(err, fs.ErrNotExist) {
				d.t.Logf("cleanup: %s: %v", cg, err)
			}
		}
		if d.version.legacy {
			// 1.6's shim socket: /run/containerd/s/sha256(<address>/<namespace>/<id>)
			sum := sha256.Sum256([]byte(filepath.Join(d.sock, "k8s.io", id)))
			socks, _ := filepath.Glob(fmt.Sprintf("/run/containerd/s/%x*", sum))
			for _, s := range socks {
				_ = os.Remove(s)
			}
		}
	}
	if d.version.legacy {
		// created by 1.6's shim; removed only if no other shim uses them
		_ = os.Remove("/run/containerd/s")
		_ = os.Remove("/run/containerd")
	}
	unmountUnder(d.t, d.dir)
	if err := os.RemoveAll(d.dir); err != nil {
		d.t.Errorf("cleanup: removing containerd dir: %v", err)
	}
}

// unmountUnder lazily unmounts every mount point under dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("cleanup: reading mountinfo: %v", err)
		return
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			t.Logf("cleanup: unmount %s: %v", p, err)
		}
	}
}
