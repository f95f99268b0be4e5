//go:build linux

package libchain

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/invoke"
)

// countingVersion is a plugin that answers VERSION with the versions in
// $1 of its body and counts its runs in the file "runs" beside it.
func countingVersion(dir, supported string) string {
	return fmt.Sprintf(`echo x >> %q
echo '{"cniVersion":"1.0.0","supportedVersions":[%s]}'
`, filepath.Join(dir, "runs"), supported)
}

func runs(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "runs"))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(data), "x")
}

func newTestProber(t *testing.T) (*CachedProber, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	return NewCachedProber(invoke.NewExec(nil), afero.NewOsFs(), filepath.Join(dir, "cache"), nil), bin
}

// TestCachedProberAsksOncePerBinary: a binary is asked VERSION once; the
// answer is reused until the binary's mtime, size or inode changes.
func TestCachedProberAsksOncePerBinary(t *testing.T) {
	p, bin := newTestProber(t)
	writeScript(t, bin, "plug", countingVersion(bin, `"0.3.0","0.3.1"`))
	ctx := context.Background()

	start := time.Now()
	got, err := p.Probe(ctx, "plug", bin)
	cold := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, Probed{Binary: filepath.Join(bin, "plug"), Supported: []string{"0.3.0", "0.3.1"}}, got)
	start = time.Now()
	got, err = p.Probe(ctx, "plug", bin)
	warm := time.Since(start)
	require.NoError(t, err)
	assert.True(t, got.Cached)
	assert.Equal(t, []string{"0.3.0", "0.3.1"}, got.Supported)
	assert.Equal(t, 1, runs(t, bin), "asked once")
	t.Logf("VERSION of a shell plugin: cold %s, cached %s", cold, warm)

	// Touched: a new mtime.
	future := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(bin, "plug"), future, future))
	_, err = p.Probe(ctx, "plug", bin)
	require.NoError(t, err)
	assert.Equal(t, 2, runs(t, bin), "asked again after a touch")

	// Replaced by a file of the same size and mtime: a new inode.
	path := filepath.Join(bin, "plug")
	writeScript(t, bin, "plug.new", countingVersion(bin, `"0.3.0","1.0.0"`))
	require.NoError(t, os.Chtimes(filepath.Join(bin, "plug.new"), future, future))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	nfi, err := os.Stat(path + ".new")
	require.NoError(t, err)
	require.Equal(t, fi.Size(), nfi.Size())
	require.NoError(t, os.Rename(path+".new", path))
	got, err = p.Probe(ctx, "plug", bin)
	require.NoError(t, err)
	assert.False(t, got.Cached)
	assert.Equal(t, []string{"0.3.0", "1.0.0"}, got.Supported)
	assert.Equal(t, 3, runs(t, bin), "asked again after a replace")

	require.NoError(t, p.Forget(path))
	_, err = p.Probe(ctx, "plug", bin)
	require.NoError(t, err)
	assert.Equal(t, 4, runs(t, bin), "asked again once forgotten")
}

// TestCachedProberBadAnswers: an answer catena cannot use is not cached
// (asked again next time); a VERSION that hangs is killed at the deadline;
// one that fails returns its error.
func TestCachedProberBadAnswers(t *testing.T) {
	p, bin := newTestProber(t)
	writeScript(t, bin, "liar", countingVersion(bin, `"1.0.0","banana"`))
	writeScript(t, bin, "hang", "sleep 30\n")
	writeScript(t, bin, "fail", `echo '{"code":7,"msg":"no VERSION for you"}'; exit 1`+"\n")
	ctx := context.Background()

	for range 2 {
		got, err := p.Probe(ctx, "liar", bin)
		require.NoError(t, err)
		_, err = Negotiate(got.Supported)
		require.Error(t, err)
	}
	assert.Equal(t, 2, runs(t, bin), "a broken answer is never cached")

	hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Probe(hctx, "hang", bin)
	require.Error(t, err)
	assert.True(t, isTimeout(err), "%v", err)
	assert.Less(t, time.Since(start), 5*time.Second)

	_, err = p.Probe(ctx, "fail", bin)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no VERSION for you")
	assert.Contains(t, err.Error(), filepath.Join(bin, "fail"))

	_, err = p.Probe(ctx, "missing", bin)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not found")
}

// writeScript installs an executable shell script name in dir.
func writeScript(t *testing.T, dir, name, body string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = f.WriteString("#!/bin/sh\n" + body)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
