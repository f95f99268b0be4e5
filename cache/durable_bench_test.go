//go:build linux

package cache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The benchmarks below measure the two crash-safe write schemes the store
// could use, on a ~2 KB record, on the disk that holds the Go temp dir and on
// tmpfs (/dev/shm). Run them with:
//
//	go test -run '^$' -bench 'Durable' -benchtime 2000x ./cache
//
// The figures and the choice they led to are in durable.go.

// benchDirs names the filesystems to measure on; tmpfs only if present.
func benchDirs(b *testing.B) map[string]string {
	dirs := map[string]string{"disk": b.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "catena-bench-")
		require.NoError(b, err)
		b.Cleanup(func() { _ = os.RemoveAll(d) })
		dirs["tmpfs"] = d
	}
	return dirs
}

func benchRecordBytes(b *testing.B) []byte {
	data, err := Encode(sampleRecord(testKey("bench")))
	require.NoError(b, err)
	return data
}

// BenchmarkDurableReplace is what DiskStore.Save does per write: temp file,
// fsync, rename, fsync of the directory.
func BenchmarkDurableReplace(b *testing.B) {
	data := benchRecordBytes(b)
	for name, dir := range benchDirs(b) {
		b.Run(name, func(b *testing.B) {
			fsys := afero.NewOsFs()
			path := filepath.Join(dir, "replace.json")
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := writeFileDurable(fsys, path, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDurableAppend is the alternative: one append-only journal per
// attachment, each write an O_APPEND write followed by fdatasync.
func BenchmarkDurableAppend(b *testing.B) {
	data := benchRecordBytes(b)
	for name, dir := range benchDirs(b) {
		b.Run(name, func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(dir, "journal.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, filePerm)
			require.NoError(b, err)
			b.Cleanup(func() { _ = f.Close() })
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := f.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSaveLoad measures a whole DiskStore.Save (encode, checksum,
// durable replace) and Load on the disk.
func BenchmarkSaveLoad(b *testing.B) {
	dir := b.TempDir()
	s := NewDiskStore(afero.NewOsFs(), dir, NewMemLocker())
	rec := sampleRecord(testKey("bench"))
	b.Run("save", func(b *testing.B) {
		for b.Loop() {
			if err := s.Save(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Load(rec.Key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
