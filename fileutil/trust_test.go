//go:build linux

package fileutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUntrustedErrorFix: the message says what to do, per kind of entry.
func TestUntrustedErrorFix(t *testing.T) {
	tests := []struct {
		err  UntrustedError
		want string
	}{
		{UntrustedError{Path: "/c/records", UID: 65534, Mode: os.ModeDir | 0o700, Dir: true, Why: "is owned by uid 65534"},
			"untrusted cache entry /c/records (owner uid 65534, mode 0700): it is owned by uid 65534; catena acts on no record until it is fixed: " +
				"check that nothing in it was planted, then chown " + ownerSpec() + " /c/records and chmod 0700 /c/records"},
		{UntrustedError{Path: "/c/records/n/a:b.json", UID: 7, Mode: 0o600, Why: "is owned by uid 7"},
			"untrusted cache entry /c/records/n/a:b.json (owner uid 7, mode 0600): it is owned by uid 7; catena acts on no record until it is fixed: " +
				"remove /c/records/n/a:b.json if catena did not write it, else chown " + ownerSpec() + " /c/records/n/a:b.json and chmod 0600 /c/records/n/a:b.json"},
		{UntrustedError{Path: "/c/locks", UID: 0, Mode: os.ModeSymlink | 0o777, Dir: true, Why: "is a symlink where a directory must be"},
			"untrusted cache entry /c/locks (owner uid 0, mode 0777 L---------): it is a symlink where a directory must be; catena acts on no record until it is fixed: " +
				"remove the symlink /c/locks (catena creates what it needs)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
	}
}

// TestTrustedFsLstatKeepsFileIdentity: an lstat through TrustedFs carries
// what os.Lstat's does to identify a version of a file (inode, size,
// mtime, ctime), so that a file read through it can be compared with
// itself later (package libchain/libcnientry removes a libcni entry only if
// unchanged).
func TestTrustedFsLstatKeepsFileIdentity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "entry")
	require.NoError(t, os.WriteFile(path, []byte("x"), 0o600))
	want, err := os.Lstat(path)
	require.NoError(t, err)
	fsys := TrustedFs(afero.NewOsFs(), dir)
	got, _, err := fsys.(afero.Lstater).LstatIfPossible(path)
	require.NoError(t, err)
	w, g := want.Sys().(*syscall.Stat_t), got.Sys().(*syscall.Stat_t)
	assert.Equal(t, w.Ino, g.Ino)
	assert.Equal(t, w.Size, g.Size)
	assert.Equal(t, w.Mtim, g.Mtim)
	assert.Equal(t, w.Ctim, g.Ctim)
	assert.NotZero(t, g.Ctim.Nano())
}
