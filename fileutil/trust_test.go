//go:build linux

package fileutil

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const otherUID = 65534 // nobody: any uid but Catena's

// requireRoot skips a test that chowns to another uid unless it runs as
// root (CI runs it as root, and must).
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test chowns to another uid and needs root (CI=true: it must run)")
		}
		t.Skip("this test chowns to another uid and needs root")
	}
}

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

// TestCheckTrusted: only a regular file (CheckPrivateFile) or a directory
// (CheckTrustedDir) of Catena's own that nobody else can write passes; the
// verdict is an *UntrustedError naming the path and whether it is a dir.
func TestCheckTrusted(t *testing.T) {
	type row struct {
		name  string
		make  func(t *testing.T, p string)
		root  bool // needs root to chown
		why   string
		trust bool
	}
	checks := []struct {
		kind  string
		dir   bool
		check func(string, os.FileInfo) error
		rows  []row
	}{
		{kind: "file", check: CheckPrivateFile, rows: []row{
			{"a private file", func(t *testing.T, p string) { writeFile(t, p, 0o600) }, false, "", true},
			{"readable by others", func(t *testing.T, p string) { writeFile(t, p, 0o644) }, false, "", true},
			{"writable by group", func(t *testing.T, p string) { writeFile(t, p, 0o620) }, false, "is writable by group or others", false},
			{"writable by others", func(t *testing.T, p string) { writeFile(t, p, 0o602) }, false, "is writable by group or others", false},
			{"a directory", func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o700)) }, false, "is not a regular file", false},
			{"a FIFO", func(t *testing.T, p string) { require.NoError(t, syscall.Mkfifo(p, 0o600)) }, false, "is not a regular file", false},
			{"a symlink", func(t *testing.T, p string) { require.NoError(t, os.Symlink("/etc/hostname", p)) }, false, "is not a regular file", false},
			{"owned by another uid", func(t *testing.T, p string) {
				writeFile(t, p, 0o600)
				require.NoError(t, os.Lchown(p, otherUID, otherUID))
			}, true, "is owned by uid 65534", false},
		}},
		{kind: "dir", dir: true, check: CheckTrustedDir, rows: []row{
			{"a private dir", func(t *testing.T, p string) { mkdir(t, p, 0o700) }, false, "", true},
			{"readable by others", func(t *testing.T, p string) { mkdir(t, p, 0o755) }, false, "", true},
			{"writable by group", func(t *testing.T, p string) { mkdir(t, p, 0o770) }, false, "is writable by group or others", false},
			{"sticky and writable by all", func(t *testing.T, p string) { mkdir(t, p, os.ModeSticky|0o777) }, false, "is writable by group or others", false},
			{"a file", func(t *testing.T, p string) { writeFile(t, p, 0o600) }, false, "is not a directory", false},
			{"a symlink to a dir", func(t *testing.T, p string) { require.NoError(t, os.Symlink(t.TempDir(), p)) }, false, "is a symlink where a directory must be", false},
			{"owned by another uid", func(t *testing.T, p string) {
				mkdir(t, p, 0o700)
				require.NoError(t, os.Lchown(p, otherUID, otherUID))
			}, true, "is owned by uid 65534", false},
		}},
	}
	for _, c := range checks {
		for _, tt := range c.rows {
			t.Run(c.kind+"/"+tt.name, func(t *testing.T) {
				if tt.root {
					requireRoot(t)
				}
				p := filepath.Join(t.TempDir(), "x")
				tt.make(t, p)
				fi, err := os.Lstat(p)
				require.NoError(t, err)
				err = c.check(p, fi)
				if tt.trust {
					require.NoError(t, err)
					return
				}
				var ue *UntrustedError
				require.True(t, errors.As(err, &ue), "want an *UntrustedError, got %v", err)
				assert.ErrorIs(t, err, ErrUntrusted)
				assert.Equal(t, p, ue.Path)
				assert.Contains(t, ue.Why, tt.why)
				assert.Equal(t, c.dir, ue.Dir)
			})
		}
	}
}

// writeFile creates the file p with exactly mode perm.
func writeFile(t *testing.T, p string, perm os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(p, []byte("x"), perm))
	require.NoError(t, os.Chmod(p, perm))
}

// mkdir creates the directory p with exactly mode perm.
func mkdir(t *testing.T, p string, perm os.FileMode) {
	t.Helper()
	require.NoError(t, os.Mkdir(p, perm))
	require.NoError(t, os.Chmod(p, perm))
}
