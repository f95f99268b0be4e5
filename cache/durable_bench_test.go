//go:build linux

package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/fileutil"
)

// The benchmarks below measure the two crash-safe write schemes the store
// could use, on a ~2 KB record, on the disk that holds the Go temp dir and on
// tmpfs (/dev/shm). Run them with:
//
//	go test -run '^$' -bench 'Durable' -benchtime 2000x ./cache
//
// The figures and the choice they led to are in recordfile.go.

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
				if err := fileutil.WriteFileDurable(fsys, path, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDurableAppend is the alternative: one append-only file per
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

// inPlaceFile is a file of size bytes of written zeros, synced: what a
// preallocated record file is before its entries (recordfile_slot.go).
func inPlaceFile(b *testing.B, path string, size int) *os.File {
	b.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, filePerm)
	require.NoError(b, err)
	b.Cleanup(func() { _ = f.Close() })
	_, err = f.Write(make([]byte, size))
	require.NoError(b, err)
	require.NoError(b, f.Sync())
	return f
}

// BenchmarkDurableInPlace is what DiskStore.Save does now for a record
// created preallocated: the entry overwrites zeros in place, then
// fdatasync; the file's size never changes.
func BenchmarkDurableInPlace(b *testing.B) {
	data := benchRecordBytes(b)
	const slots = 64
	for name, dir := range benchDirs(b) {
		b.Run(name, func(b *testing.B) {
			f := inPlaceFile(b, filepath.Join(dir, "inplace.log"), slots*len(data))
			b.SetBytes(int64(len(data)))
			i := 0
			for b.Loop() {
				if _, err := f.WriteAt(data, int64(i%slots*len(data))); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkDurableConcurrent runs the append and the in-place write from
// 50 writers at once, each on its own file, on the disk: the shape of 50
// concurrent ADDs' record writes.
func BenchmarkDurableConcurrent(b *testing.B) {
	data := benchRecordBytes(b)
	dir := b.TempDir()
	const slots = 64
	for _, mode := range []string{"append", "in-place"} {
		b.Run(mode, func(b *testing.B) {
			var n atomic.Int64
			b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				path := filepath.Join(dir, fmt.Sprintf("%s-%d", mode, n.Add(1)))
				var f *os.File
				if mode == "append" {
					var err error
					f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, filePerm)
					require.NoError(b, err)
					defer func() { _ = f.Close() }()
				} else {
					f = inPlaceFile(b, path, slots*len(data))
				}
				i := 0
				for pb.Next() {
					var err error
					if mode == "append" {
						_, err = f.Write(data)
					} else {
						_, err = f.WriteAt(data, int64(i%slots*len(data)))
					}
					if err == nil {
						err = unix.Fdatasync(int(f.Fd()))
					}
					if err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
