//go:build linux

package cache

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/fileutil"
)

const otherUID = 65534 // nobody: any uid but Catena's

func requireRootForChown(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the trust tests chown to another uid and need root (CI=true: they must run)")
		}
		t.Skip("the trust tests chown to another uid and need root")
	}
}

// trustRig is a cache dir on the real disk with every kind of entry: a
// record (podnet/c1/eth0), a pending marker, the network's lock dir, a
// quarantined record, and a record outside the cache dir that links may
// point to.
type trustRig struct {
	dir     string
	store   *DiskStore
	locker  *FlockLocker
	key     Key
	outside string // a directory outside the cache dir holding a valid copy of everything
}

func newTrustRig(t *testing.T) *trustRig {
	t.Helper()
	requireRootForChown(t)
	base := t.TempDir()
	r := &trustRig{dir: filepath.Join(base, "catena"), key: testKey("c1"), outside: filepath.Join(base, "outside")}
	r.locker = NewFlockLocker(filepath.Join(r.dir, LocksDir))
	r.store = NewDiskStore(afero.NewOsFs(), r.dir, r.locker)
	require.NoError(t, r.store.Save(sampleRecord(r.key)))
	require.NoError(t, r.store.NotePending(r.key, PendingNote{}))
	u, err := r.store.TryLock(r.key, Holder{Verb: "ADD"})
	require.NoError(t, err)
	require.NoError(t, u.Unlock())
	junk := testKey("junk")
	require.NoError(t, r.store.Save(sampleRecord(junk)))
	require.NoError(t, os.WriteFile(r.store.Path(junk), []byte("junk"), 0o600))
	_, err = r.store.Quarantine(junk)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(r.outside, 0o700))
	require.NoError(t, os.CopyFS(r.outside, os.DirFS(r.dir)))
	require.NoError(t, r.store.Audit(), "the rig starts trusted")
	return r
}

func (r *trustRig) path(rel ...string) string {
	return filepath.Join(append([]string{r.dir}, rel...)...)
}

// swapForLink replaces the entry rel by a symlink to its copy outside.
func (r *trustRig) swapForLink(t *testing.T, rel ...string) string {
	t.Helper()
	p := r.path(rel...)
	target, err := filepath.Rel(r.dir, p)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(p))
	require.NoError(t, os.Symlink(filepath.Join(r.outside, target), p))
	return p
}

func chownTo(t *testing.T, uid int, p string) string {
	t.Helper()
	require.NoError(t, os.Lchown(p, uid, uid))
	return p
}

func chmodTo(t *testing.T, mode os.FileMode, p string) string {
	t.Helper()
	require.NoError(t, os.Chmod(p, mode))
	return p
}

// TestTrustRefusesUntrustedEntries: an entry of the cache dir that another
// user owns or could write, or a symlink where a directory of the cache
// dir must be, makes every operation that goes through it fail with an
// *UntrustedError naming that path; Audit (STATUS) finds the same path;
// nothing outside the cache dir is touched.
func TestTrustRefusesUntrustedEntries(t *testing.T) {
	type op func(r *trustRig) error
	load := func(r *trustRig) error { _, err := r.store.Load(r.key); return err }
	save := func(r *trustRig) error { return r.store.Save(sampleRecord(r.key)) }
	remove := func(r *trustRig) error { return r.store.Remove(r.key) }
	list := func(r *trustRig) error { _, err := r.store.List(); return err }
	quarantine := func(r *trustRig) error { _, err := r.store.Quarantine(r.key); return err }
	lock := func(r *trustRig) error {
		u, err := r.store.TryLock(r.key, Holder{Verb: "DEL"})
		if err == nil {
			_ = u.Unlock()
		}
		return err
	}
	note := func(r *trustRig) error { return r.store.NotePending(r.key, PendingNote{}) }
	pending := func(r *trustRig) error { _, err := r.store.PendingTeardown("podnet", 5); return err }
	probe := func(r *trustRig) error { return r.store.Probe() }
	recordOps := []op{load, save, remove, list, quarantine, probe}

	tests := []struct {
		name  string
		plant func(t *testing.T, r *trustRig) string // returns the path to be named
		ops   []op
	}{
		{"cache dir owned by another uid", func(t *testing.T, r *trustRig) string { return chownTo(t, otherUID, r.dir) },
			append(recordOps, note, pending)},
		{"cache dir writable by others", func(t *testing.T, r *trustRig) string { return chmodTo(t, 0o757, r.dir) },
			append(recordOps, note, pending)},
		{"cache dir is a symlink", func(t *testing.T, r *trustRig) string {
			require.NoError(t, os.Rename(r.dir, r.dir+".real"))
			require.NoError(t, os.Symlink(r.dir+".real", r.dir))
			return r.dir
		}, []op{load, save, list, probe, lock}},
		{"records/ is a symlink", func(t *testing.T, r *trustRig) string { return r.swapForLink(t, "records") }, recordOps},
		{"records/ owned by another uid", func(t *testing.T, r *trustRig) string { return chownTo(t, otherUID, r.path("records")) }, recordOps},
		{"records/ writable by group", func(t *testing.T, r *trustRig) string { return chmodTo(t, 0o770, r.path("records")) }, recordOps},
		{"network dir owned by another uid", func(t *testing.T, r *trustRig) string {
			return chownTo(t, otherUID, r.path("records", "podnet"))
		}, recordOps},
		{"network dir writable by others", func(t *testing.T, r *trustRig) string {
			return chmodTo(t, 0o703, r.path("records", "podnet"))
		}, recordOps},
		{"record owned by another uid", func(t *testing.T, r *trustRig) string {
			return chownTo(t, otherUID, r.store.Path(r.key))
		}, []op{load, save, quarantine, probe}},
		{"locks/ is a symlink", func(t *testing.T, r *trustRig) string { return r.swapForLink(t, "locks") }, []op{lock, probe}},
		{"locks/ network dir owned by another uid", func(t *testing.T, r *trustRig) string {
			return chownTo(t, otherUID, r.path("locks", "podnet"))
		}, []op{lock, probe}},
		{"lock file owned by another uid", func(t *testing.T, r *trustRig) string {
			p := r.locker.Path(r.key)
			require.NoError(t, os.WriteFile(p, nil, 0o600))
			return chownTo(t, otherUID, p)
		}, []op{lock, probe}},
		{"lock file writable by others", func(t *testing.T, r *trustRig) string {
			p := r.locker.Path(r.key)
			require.NoError(t, os.WriteFile(p, nil, 0o600))
			return chmodTo(t, 0o606, p)
		}, []op{lock}},
		{"lock file is a symlink", func(t *testing.T, r *trustRig) string {
			p := r.locker.Path(r.key)
			require.NoError(t, os.Symlink(filepath.Join(r.outside, "victim"), p))
			return p
		}, nil}, // refused with ELOOP, see below
		{"pending/ is a symlink", func(t *testing.T, r *trustRig) string { return r.swapForLink(t, "pending") }, []op{note, pending, probe}},
		{"pending network dir writable by others", func(t *testing.T, r *trustRig) string {
			return chmodTo(t, 0o777, r.path("pending", "podnet"))
		}, []op{note, pending, probe}},
		{"quarantine/ is a symlink", func(t *testing.T, r *trustRig) string {
			require.NoError(t, os.WriteFile(r.store.Path(r.key), []byte("corrupt"), 0o600))
			return r.swapForLink(t, "quarantine")
		}, []op{quarantine, probe}},
		{"quarantine/ owned by another uid", func(t *testing.T, r *trustRig) string {
			require.NoError(t, os.WriteFile(r.store.Path(r.key), []byte("corrupt"), 0o600))
			return chownTo(t, otherUID, r.path("quarantine"))
		}, []op{quarantine, probe}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTrustRig(t)
			path := tt.plant(t, r)
			before := snapshot(t, r.outside)
			for i, op := range tt.ops {
				err := op(r)
				var ue *fileutil.UntrustedError
				require.Truef(t, errors.As(err, &ue), "op %d: want an *UntrustedError, got %v", i, err)
				assert.ErrorIs(t, err, fileutil.ErrUntrusted)
				assert.Equal(t, path, ue.Path, "op %d names the entry", i)
				assert.Contains(t, err.Error(), path)
				assert.Contains(t, err.Error(), "owner uid")
				assert.Contains(t, err.Error(), "mode 0")
				assert.False(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound),
					"op %d: never a reason to quarantine or to report success: %v", i, err)
			}
			if tt.name == "lock file is a symlink" {
				err := lock(r)
				require.ErrorIs(t, err, syscall.ELOOP, "the link is not followed")
				_, err = os.Lstat(filepath.Join(r.outside, "victim"))
				require.ErrorIs(t, err, os.ErrNotExist, "nothing was created through it")
			}
			assert.Equal(t, before, snapshot(t, r.outside), "nothing outside the cache dir was touched")
		})
	}
}

// snapshot maps every entry under dir to its mode, size and content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(data)
		}
		out[p] = v
		return nil
	}))
	return out
}

// TestTrustedRigIsUsable: the checks refuse nothing that Catena itself
// made, whatever the umask, and directories and files get exactly 0700 and
// 0600.
func TestTrustedRigIsUsable(t *testing.T) {
	old := syscall.Umask(0o277) // would leave a dir 0500 and a file 0400
	t.Cleanup(func() { syscall.Umask(old) })
	r := newTrustRig(t)
	for _, rel := range [][]string{{}, {"records"}, {"records", "podnet"}, {"locks"}, {"locks", "podnet"},
		{"pending"}, {"pending", "podnet"}, {"quarantine"}} {
		fi, err := os.Lstat(r.path(rel...))
		require.NoError(t, err)
		assert.Equal(t, os.ModeDir|0o700, fi.Mode(), "%v", rel)
	}
	fi, err := os.Lstat(r.store.Path(r.key))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode())
	rec, err := r.store.Load(r.key)
	require.NoError(t, err)
	assert.Equal(t, r.key, rec.Key)
	require.NoError(t, r.store.Probe())
}

// TestWalkRefusesDirSwappedForSymlink: records/<network> is a real
// directory when Load lstats it and a symlink to a valid copy when Load
// opens the record: the open walks again and refuses the link. And a
// directory swapped for a link after the walk opened it is not followed
// either: the fd is the directory that was checked.
func TestWalkRefusesDirSwappedForSymlink(t *testing.T) {
	r := newTrustRig(t)
	netDir := r.path("records", "podnet")
	exists, err := r.store.checkNetworkDir(r.key)
	require.NoError(t, err)
	require.True(t, exists, "the lstat step saw a real directory")

	fd, err := fileutil.WalkDir(r.dir, "records/podnet", false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })

	require.NoError(t, os.Rename(netDir, netDir+".moved"))
	require.NoError(t, os.Symlink(filepath.Join(r.outside, "records", "podnet"), netDir))

	_, err = r.store.readRecord(r.key.String(), r.store.Path(r.key))
	var ue *fileutil.UntrustedError
	require.True(t, errors.As(err, &ue), "the open after the swap is refused: %v", err)
	assert.Equal(t, netDir, ue.Path)
	assert.Contains(t, ue.Why, "symlink")

	name := filepath.Base(r.store.Path(r.key))
	require.NoError(t, os.Remove(filepath.Join(r.outside, "records", "podnet", name)))
	var st unix.Stat_t
	require.NoError(t, unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW),
		"the fd still reaches the checked directory (now %s.moved), not the link's target", netDir)
}

// TestTrustOnMemMapFs: on a filesystem without owners (the unit tests'
// MemMapFs) only the type checks apply: a group-writable dir is accepted.
func TestTrustOnMemMapFs(t *testing.T) {
	fsys := afero.NewMemMapFs()
	s := NewDiskStore(fsys, "/var/lib/cni/catena", NewMemLocker())
	require.NoError(t, fsys.MkdirAll("/var/lib/cni/catena/records/podnet", 0o777))
	require.NoError(t, s.Save(sampleRecord(testKey("c1"))))
	_, err := s.Load(testKey("c1"))
	require.NoError(t, err)
	require.NoError(t, s.Probe())
}
