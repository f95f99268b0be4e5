package faultfs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFaultFsNthOperation(t *testing.T) {
	for _, sticky := range []bool{false, true} {
		f := New(afero.NewMemMapFs())
		f.Inject(Fault{Op: OpWrite, N: 2, Err: syscall.EIO, Sticky: sticky})
		file, err := f.Create("/x")
		require.NoError(t, err)
		var errs []error
		for range 3 {
			_, err := file.Write([]byte("abcd"))
			errs = append(errs, err)
		}
		require.NoError(t, file.Close())
		assert.NoError(t, errs[0])
		assert.ErrorIs(t, errs[1], syscall.EIO)
		assert.Contains(t, errs[1].Error(), "/x")
		if sticky {
			assert.ErrorIs(t, errs[2], syscall.EIO)
			assert.Equal(t, 2, f.Injected())
		} else {
			assert.NoError(t, errs[2])
			assert.Equal(t, 1, f.Injected())
		}
		assert.Equal(t, 3, f.Count(OpWrite))
		assert.Equal(t, 1, f.Count(OpCreate))
		f.Heal()
		f.ResetCounts()
		assert.Zero(t, f.Count(OpWrite))
	}
}

func TestFaultFsShortWriteOnENOSPC(t *testing.T) {
	base := afero.NewMemMapFs()
	f := New(base)
	f.Inject(Fault{Op: OpWrite, N: 1, Err: syscall.ENOSPC})
	file, err := f.Create("/x")
	require.NoError(t, err)
	n, err := file.Write([]byte("abcdef"))
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, 3, n, "a filling disk takes part of the write")
	require.NoError(t, file.Close())
	data, err := afero.ReadFile(base, "/x")
	require.NoError(t, err)
	assert.Equal(t, "abc", string(data))
}

func TestFaultFsEveryKind(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		op  Op
		run func(fsys afero.Fs) error
	}{
		{OpCreate, func(fsys afero.Fs) error {
			_, err := fsys.OpenFile(p("c"), os.O_CREATE|os.O_WRONLY, 0o600)
			return err
		}},
		{OpMkdir, func(fsys afero.Fs) error { return fsys.Mkdir(p("m"), 0o700) }},
		{OpRename, func(fsys afero.Fs) error { return fsys.Rename(p("f"), p("g")) }},
		{OpRemove, func(fsys afero.Fs) error { return fsys.Remove(p("f")) }},
		{OpSync, func(fsys afero.Fs) error {
			file, err := fsys.OpenFile(p("f"), os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer func() { _ = file.Close() }()
			return file.Sync()
		}},
		{OpSyncDir, func(fsys afero.Fs) error {
			d, err := fsys.Open(dir)
			if err != nil {
				return err
			}
			defer func() { _ = d.Close() }()
			return d.Sync()
		}},
		{OpWrite, func(fsys afero.Fs) error {
			file, err := fsys.OpenFile(p("f"), os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer func() { _ = file.Close() }()
			return file.Truncate(0)
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			require.NoError(t, os.WriteFile(p("f"), []byte("data"), 0o600))
			f := New(afero.NewOsFs())
			f.Inject(Fault{Op: tt.op, N: 1, Err: syscall.EROFS})
			assert.ErrorIs(t, tt.run(f), syscall.EROFS)
			assert.Equal(t, 1, f.Count(tt.op))
			for _, other := range Ops {
				if other != tt.op {
					assert.Zero(t, f.Count(other), "%s counted as %s", tt.op, other)
				}
			}
			data, err := os.ReadFile(p("f"))
			require.NoError(t, err, "the failed operation changed nothing")
			assert.Equal(t, "data", string(data))
			f.Heal()
			require.NoError(t, tt.run(f), "healed")
			_ = os.Remove(p("g"))
			_ = os.Remove(p("m"))
			_ = os.Remove(p("c"))
		})
	}
}

func TestFaultFsLstat(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/nonexistent", filepath.Join(dir, "l")))
	f := New(afero.NewOsFs())
	fi, ok, err := f.LstatIfPossible(filepath.Join(dir, "l"))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, os.ModeSymlink, fi.Mode().Type())
	_, ok, err = New(NewCrashFs()).LstatIfPossible("/")
	require.NoError(t, err)
	assert.False(t, ok)
}
