package faultfs

import (
	"io"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/afero"
)

// crashFile is an open file or directory of a CrashFs. It keeps its node
// whatever happens to its name, as an open file descriptor does.
type crashFile struct {
	fs     *CrashFs
	n      *node
	name   string
	flag   int
	off    int64
	closed bool
}

var _ afero.File = (*crashFile)(nil)

// begin counts the operation and checks the handle; on success c.fs.mu is
// held.
func (f *crashFile) begin(op string) error {
	if err := f.fs.begin("%s %s", op, f.name); err != nil {
		return pathErr(op, f.name, err)
	}
	if f.closed {
		f.fs.mu.Unlock()
		return pathErr(op, f.name, os.ErrClosed)
	}
	return nil
}

func (f *crashFile) writable() bool { return f.flag&(os.O_WRONLY|os.O_RDWR) != 0 }
func (f *crashFile) readable() bool { return f.flag&os.O_WRONLY == 0 }

func (f *crashFile) Name() string { return f.name }

func (f *crashFile) Close() error {
	if err := f.begin("close"); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	f.closed = true
	return nil
}

func (f *crashFile) Read(p []byte) (int, error) {
	if err := f.begin("read"); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	n, err := f.readAt(p, f.off)
	f.off += int64(n)
	return n, err
}

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.begin("readat"); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	return f.readAt(p, off)
}

func (f *crashFile) readAt(p []byte, off int64) (int, error) {
	switch {
	case f.n.dir:
		return 0, pathErr("read", f.name, syscall.EISDIR)
	case !f.readable():
		return 0, pathErr("read", f.name, syscall.EBADF)
	case off < 0:
		return 0, pathErr("read", f.name, syscall.EINVAL)
	case off >= int64(len(f.n.data)):
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *crashFile) Seek(offset int64, whence int) (int64, error) {
	if err := f.begin("seek"); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	switch whence {
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		offset += int64(len(f.n.data))
	}
	if offset < 0 {
		return 0, pathErr("seek", f.name, syscall.EINVAL)
	}
	f.off = offset
	return offset, nil
}

func (f *crashFile) Write(p []byte) (int, error) {
	if err := f.begin("write"); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	off := f.off
	if f.flag&os.O_APPEND != 0 {
		off = int64(len(f.n.data))
	}
	n, err := f.writeAt(p, off)
	f.off = off + int64(n)
	return n, err
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.begin("writeat"); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	return f.writeAt(p, off)
}

func (f *crashFile) writeAt(p []byte, off int64) (int, error) {
	switch {
	case f.n.dir:
		return 0, pathErr("write", f.name, syscall.EISDIR)
	case !f.writable():
		return 0, pathErr("write", f.name, syscall.EBADF)
	case off < 0:
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], p)
	f.n.mtime = time.Now()
	return len(p), nil
}

func (f *crashFile) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

func (f *crashFile) Truncate(size int64) error {
	if err := f.begin("truncate"); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	switch {
	case f.n.dir:
		return pathErr("truncate", f.name, syscall.EISDIR)
	case !f.writable():
		return pathErr("truncate", f.name, syscall.EBADF)
	case size < 0:
		return pathErr("truncate", f.name, syscall.EINVAL)
	case size <= int64(len(f.n.data)):
		f.n.data = f.n.data[:size:size]
	default:
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

// Sync makes the file's content, or the directory's entries, durable.
func (f *crashFile) Sync() error {
	if err := f.begin("sync"); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	switch {
	case f.fs.lies:
	case f.n.dir:
		f.n.durable = clone(f.n.entries)
	default:
		f.n.synced = slices.Clone(f.n.data)
	}
	return nil
}

func (f *crashFile) Stat() (os.FileInfo, error) {
	if err := f.begin("fstat"); err != nil {
		return nil, err
	}
	defer f.fs.mu.Unlock()
	return f.n.info(baseName(f.name)), nil
}

func (f *crashFile) Readdir(count int) ([]os.FileInfo, error) {
	names, err := f.readdir(count)
	if err != nil {
		return nil, err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	out := make([]os.FileInfo, 0, len(names))
	for _, name := range names {
		if child, ok := f.n.entries[name]; ok {
			out = append(out, child.info(name))
		}
	}
	return out, nil
}

func (f *crashFile) Readdirnames(count int) ([]string, error) { return f.readdir(count) }

// readdir returns the next count names (all with count <= 0), sorted; f.off
// counts the names already returned.
func (f *crashFile) readdir(count int) ([]string, error) {
	if err := f.begin("readdir"); err != nil {
		return nil, err
	}
	defer f.fs.mu.Unlock()
	if !f.n.dir {
		return nil, pathErr("readdir", f.name, syscall.ENOTDIR)
	}
	names := f.n.names()
	if f.off >= int64(len(names)) {
		if count > 0 {
			return nil, io.EOF
		}
		return []string{}, nil
	}
	names = names[f.off:]
	if count > 0 && count < len(names) {
		names = names[:count]
	}
	f.off += int64(len(names))
	return names, nil
}

func clone(m map[string]*node) map[string]*node {
	out := make(map[string]*node, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// fileInfo is a snapshot of a node.
type fileInfo struct {
	name  string
	size  int64
	mode  os.FileMode
	mtime time.Time
}

func (n *node) info(name string) os.FileInfo {
	fi := &fileInfo{name: name, size: int64(len(n.data)), mode: n.perm, mtime: n.mtime}
	if n.dir {
		fi.mode |= os.ModeDir
		fi.size = 0
	}
	return fi
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) Mode() os.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return fi.mtime }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return nil }
