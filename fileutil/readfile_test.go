package fileutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadSmallFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
		return p
	}
	small := write("small.conf", "{}")
	big := write("big.conf", "0123456789")
	link := filepath.Join(dir, "link.conf")
	require.NoError(t, os.Symlink(small, link))
	fifo := filepath.Join(dir, "fifo.conf")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	cases := []struct {
		name     string
		path     string
		noFollow bool
		want     string
		err      string
	}{
		{name: "regular", path: small, want: "{}"},
		{name: "too large", path: big, err: "is larger than 8 bytes"},
		{name: "symlink followed", path: link, want: "{}"},
		{name: "symlink refused", path: link, noFollow: true, err: "too many levels of symbolic links"},
		{name: "fifo never blocks", path: fifo, err: "is not a regular file"},
		{name: "directory", path: dir, err: "is not a regular file"},
		{name: "missing", path: filepath.Join(dir, "nope"), err: "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var data []byte
			var err error
			go func() {
				defer close(done)
				data, err = ReadSmallFile(afero.NewOsFs(), tc.path, 8, tc.noFollow)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("ReadSmallFile blocked")
			}
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(data))
		})
	}
}
