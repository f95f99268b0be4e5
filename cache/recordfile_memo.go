package cache

import (
	"crypto/sha256"
	"os"
	"sync"
	"syscall"
)

// fileSig tells whether a record file is still exactly as this process last
// wrote it: another writer's entry moves the end of the entries (written in
// place, it changes neither the file's size nor, within the clock's
// granularity, its mtime), an append also its size, and a replace its
// inode (and, were the inode number reused, its mtime).
type fileSig struct {
	dev, ino uint64
	size     int64
	mtime    int64
	// entries is where the entries end: the first zero of a
	// preallocated record file, else its size.
	entries int64
}

// sigOf is the signature of a record file whose entries end at entries.
func sigOf(fi os.FileInfo, entries int64) fileSig {
	m := fileSig{size: fi.Size(), mtime: fi.ModTime().UnixNano(), entries: entries}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		m.dev, m.ino = uint64(st.Dev), st.Ino //nolint:unconvert // Dev's type varies by platform
	}
	return m
}

// valid reports whether m describes a written record file.
func (m fileSig) valid() bool { return m.size > 0 }

// lastWrite is what a DiskStore remembers of its last write of one record:
// the digest of each step's JSON, and the file right after the write.
type lastWrite struct {
	sums [][sha256.Size]byte
	sig  fileSig
}

// writeMemo holds a DiskStore's lastWrite per key. Writes of one key are
// serialised by the key's lock; the mutex covers the map across keys.
type writeMemo struct {
	mu   sync.Mutex
	last map[Key]lastWrite
}

// take returns and forgets key's lastWrite: a Save that fails leaves none.
func (m *writeMemo) take(key Key) (lastWrite, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lw, ok := m.last[key]
	delete(m.last, key)
	return lw, ok
}

func (m *writeMemo) put(key Key, lw lastWrite) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = make(map[Key]lastWrite)
	}
	m.last[key] = lw
}

func (m *writeMemo) forget(key Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, key)
}
