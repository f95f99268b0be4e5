package cache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// syncSpy is a file whose Sync is counted, with the fd of another file:
// datasync must flush the real file through its fd (fdatasync), not fall
// back to Sync, which on a real file is a full fsync and on the crash
// file system of the tests is what makes an entry durable.
type syncSpy struct {
	afero.File
	fd    uintptr
	syncs int
}

func (s *syncSpy) Fd() uintptr { return s.fd }
func (s *syncSpy) Sync() error { s.syncs++; return nil }

// TestDatasyncUsesTheFd covers the real-file branch of datasync, which the
// crash file system never takes: on a file with an fd it is fdatasync of
// that fd (a pipe's fd makes it fail with EINVAL, which only fdatasync
// does), and Sync is not called; without an fd, Sync is.
func TestDatasyncUsesTheFd(t *testing.T) {
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	t.Cleanup(func() { _ = unix.Close(p[0]); _ = unix.Close(p[1]) })
	real, err := os.Create(filepath.Join(t.TempDir(), "j"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = real.Close() })
	mem, err := afero.NewMemMapFs().Create("/j")
	require.NoError(t, err)

	tests := []struct {
		name      string
		spy       *syncSpy
		wantErr   error
		wantSyncs int
	}{
		{"pipe fd: fdatasync's own error", &syncSpy{File: mem, fd: uintptr(p[1])}, unix.EINVAL, 0},
		{"real file's fd: fdatasync, no Sync", &syncSpy{File: mem, fd: real.Fd()}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := datasync(tt.spy)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), "fdatasync")
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantSyncs, tt.spy.syncs, "Sync must not stand in for fdatasync on a real file")
		})
	}
	t.Run("no fd: Sync", func(t *testing.T) {
		spy := &struct{ afero.File }{mem}
		require.NoError(t, datasync(spy))
	})
}
