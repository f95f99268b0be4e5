package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/node/reconcile"
	"github.com/catena-cni/catena/node/reconcile/fakecri"
)

// saveCRI stores a complete [okplug, okplug] record of cid as a CRI runtime
// makes it (K8S_POD_INFRA_CONTAINER_ID), or as cnitool does (infra false).
func (f *fixture) saveCRI(cid string, infra bool) {
	f.t.Helper()
	rec := f.save(cid, "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded, cache.StepAdded)
	if infra {
		rec.Args = "K8S_POD_NAMESPACE=default;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=" + cid
		require.NoError(f.t, f.store.Save(rec))
	}
}

// TestReconcileCommand: a first pass marks, a pass after --grace reclaims
// only the CRI record the runtime forgot; --dry-run and --json; a runtime
// that is gone keeps everything and exits 1.
func TestReconcileCommand(t *testing.T) {
	f := newFixture(t)
	sock := filepath.Join(t.TempDir(), "cri.sock")
	srv, err := fakecri.Start(sock)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	srv.Set("live")
	f.saveCRI("live", true)
	f.saveCRI("gone", true)
	f.saveCRI("cnitool", false)
	f.now = time.Now().Add(time.Hour)
	args := []string{"reconcile", "--cache-dir", f.cacheDir, "--runtime-endpoint", sock, "--grace", "1m"}

	out, stderr, code := f.run(append(args, "--dry-run", "--json")...)
	require.Equal(t, 0, code, stderr)
	rep := decodeJSON[reconcile.Report](t, out)
	assert.Equal(t, 3, rep.Records)
	assert.Equal(t, 2, rep.InScope)
	actions := map[string]reconcile.Action{}
	for _, d := range rep.Decisions {
		actions[d.Key.ContainerID] = d.Action
	}
	assert.Equal(t, map[string]reconcile.Action{"live": "alive", "gone": "would-mark", "cnitool": "out-of-scope"}, actions)

	out, stderr, code = f.run(args...)
	require.Equal(t, 0, code, stderr)
	rows := tableRows(out)
	assert.Equal(t, []string{"ACTION", "NETWORK", "CONTAINER", "IFNAME", "REASON"}, rows[0])
	assert.True(t, hasRow(rows, "marked", testNet, "gone", "eth0"), out)
	assert.True(t, hasRow(rows, "out-of-scope", testNet, "cnitool", "eth0"), out)
	assert.Contains(t, out, "1 candidates, 1 marked, 0 reclaimed")
	assert.Nil(t, f.calls())

	f.now = f.now.Add(time.Minute)
	out, stderr, code = f.run(args...)
	require.Equal(t, 0, code, stderr)
	assert.True(t, hasRow(tableRows(out), "reclaimed", testNet, "gone", "eth0"), out)
	assert.Equal(t, []string{"DEL gone", "DEL gone"}, f.calls())
	assert.False(t, f.recordExists("gone", "eth0"))
	assert.True(t, f.recordExists("live", "eth0"))
	assert.True(t, f.recordExists("cnitool", "eth0"))

	srv.Set()
	srv.Stop()
	out, stderr, code = f.run(append(args, "--json")...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "ListPodSandbox")
	rep = decodeJSON[reconcile.Report](t, out)
	assert.NotEmpty(t, rep.RuntimeError)
	assert.Equal(t, 1, rep.Kept, "live is kept: errors mean keep")
	assert.Zero(t, rep.Marked)
	assert.True(t, f.recordExists("live", "eth0"))

	_, stderr, code = f.run("reconcile", "--cache-dir", f.cacheDir, "--grace", "0s")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--grace")
}

// TestReconcileFindsTheRuntime: --runtime-endpoint auto (the default)
// lists the runtime kubelet uses, else the only socket that answers; it
// fails naming them when none exists, and refuses to guess between two
// that answer; a named endpoint is used as given.
func TestReconcileFindsTheRuntime(t *testing.T) {
	dir := t.TempDir()
	containerd, crio, other := filepath.Join(dir, "containerd.sock"), filepath.Join(dir, "crio.sock"), filepath.Join(dir, "other.sock")
	srv, err := fakecri.Start(crio)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	srv.Set("live")
	empty, err := fakecri.Start(other) // another runtime, with no sandbox
	require.NoError(t, err)
	t.Cleanup(empty.Stop)
	empty.SetRuntime("containerd", "2.4.0")
	tests := []struct {
		name     string
		sockets  []string
		kubelet  string // kubelet's endpoint ("": no kubelet)
		flags    []string
		wantCode int
		wantErr  string
	}{
		{name: "auto takes CRI-O's when containerd's is missing", sockets: []string{containerd, crio}},
		{name: "auto with no socket fails, naming them", sockets: []string{containerd}, wantCode: 1, wantErr: "--runtime-endpoint auto: no runtime socket found (" + containerd},
		{name: "auto takes kubelet's of two that answer", sockets: []string{other, crio}, kubelet: "unix://" + crio},
		{name: "auto refuses to guess between two that answer", sockets: []string{other, crio}, wantCode: 1,
			wantErr: "more than one runtime socket answers, and neither kubelet's endpoint nor the Node's runtime is known; sockets found: " + other + " (containerd://2.4.0), " + crio},
		{name: "a named endpoint wins", sockets: []string{containerd}, flags: []string{"--runtime-endpoint", crio}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.sockets = tt.sockets
			f.kubelet = tt.kubelet
			f.saveCRI("live", true)
			out, stderr, code := f.run(append([]string{"reconcile", "--cache-dir", f.cacheDir, "--dry-run", "--json"}, tt.flags...)...)
			require.Equal(t, tt.wantCode, code, stderr)
			if tt.wantErr != "" {
				assert.Contains(t, stderr, tt.wantErr)
				return
			}
			rep := decodeJSON[reconcile.Report](t, out)
			assert.Equal(t, 1, rep.Sandboxes, "listed the fake runtime's sandbox")
		})
	}
}
