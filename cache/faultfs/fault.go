package faultfs

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/afero"
)

// Op is a kind of filesystem operation a fault can hit.
type Op string

const (
	// OpCreate: an OpenFile with O_CREATE.
	OpCreate Op = "create"
	// OpWrite: Write, WriteAt, WriteString or Truncate of a file.
	OpWrite Op = "write"
	// OpSync: Sync of a regular file (fsync, fdatasync).
	OpSync Op = "sync"
	// OpSyncDir: Sync of a directory.
	OpSyncDir Op = "syncdir"
	// OpRename: Rename.
	OpRename Op = "rename"
	// OpRemove: Remove or RemoveAll.
	OpRemove Op = "remove"
	// OpMkdir: Mkdir or MkdirAll.
	OpMkdir Op = "mkdir"
)

// Ops lists every Op a fault can hit.
var Ops = []Op{OpCreate, OpWrite, OpSync, OpSyncDir, OpRename, OpRemove, OpMkdir}

// Fault makes the N-th operation (1-based, counted from the last
// ResetCounts) of kind Op fail with Err, and every later one too if Sticky
// (a disk that stays full, a filesystem remounted read-only). A write that
// fails with ENOSPC first writes half its bytes, as a filling disk does.
type Fault struct {
	Op     Op
	N      int
	Err    error
	Sticky bool
}

func (f Fault) String() string {
	s := fmt.Sprintf("%v on %s #%d", f.Err, f.Op, f.N)
	if f.Sticky {
		s += " and after"
	}
	return s
}

// FaultFs wraps an afero.Fs and injects faults. It counts every operation
// of each kind, faulty or not.
type FaultFs struct {
	base     afero.Fs
	mu       sync.Mutex
	counts   map[Op]int
	faults   []Fault
	injected int
}

var (
	_ afero.Fs      = (*FaultFs)(nil)
	_ afero.Lstater = (*FaultFs)(nil)
)

// New wraps base. Its Files do not expose Fd, so that every sync goes
// through Sync and can be counted and failed.
func New(base afero.Fs) *FaultFs {
	return &FaultFs{base: base, counts: map[Op]int{}}
}

// Inject adds a fault.
func (f *FaultFs) Inject(ft Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, ft)
}

// Heal removes every fault; counts are kept.
func (f *FaultFs) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// ResetCounts starts counting every kind from zero again.
func (f *FaultFs) ResetCounts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = map[Op]int{}
}

// Count returns how many operations of kind op were attempted.
func (f *FaultFs) Count(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

// Injected returns how many operations failed by a fault.
func (f *FaultFs) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// check counts one operation of kind op and returns its injected error.
func (f *FaultFs) check(op Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[op]++
	n := f.counts[op]
	for _, ft := range f.faults {
		if ft.Op == op && (n == ft.N || ft.Sticky && n > ft.N) {
			f.injected++
			return ft.Err
		}
	}
	return nil
}

// Name implements afero.Fs.
func (f *FaultFs) Name() string { return "FaultFs(" + f.base.Name() + ")" }

// Create implements afero.Fs.
func (f *FaultFs) Create(name string) (afero.File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open implements afero.Fs.
func (f *FaultFs) Open(name string) (afero.File, error) {
	return f.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile implements afero.Fs.
func (f *FaultFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := f.check(OpCreate); err != nil {
			return nil, pathErr("open", name, err)
		}
	}
	file, err := f.base.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// Mkdir implements afero.Fs.
func (f *FaultFs) Mkdir(name string, perm os.FileMode) error {
	if err := f.check(OpMkdir); err != nil {
		return pathErr("mkdir", name, err)
	}
	return f.base.Mkdir(name, perm)
}

// MkdirAll implements afero.Fs.
func (f *FaultFs) MkdirAll(name string, perm os.FileMode) error {
	if err := f.check(OpMkdir); err != nil {
		return pathErr("mkdir", name, err)
	}
	return f.base.MkdirAll(name, perm)
}

// Remove implements afero.Fs.
func (f *FaultFs) Remove(name string) error {
	if err := f.check(OpRemove); err != nil {
		return pathErr("remove", name, err)
	}
	return f.base.Remove(name)
}

// RemoveAll implements afero.Fs.
func (f *FaultFs) RemoveAll(name string) error {
	if err := f.check(OpRemove); err != nil {
		return pathErr("removeall", name, err)
	}
	return f.base.RemoveAll(name)
}

// Rename implements afero.Fs.
func (f *FaultFs) Rename(oldname, newname string) error {
	if err := f.check(OpRename); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return f.base.Rename(oldname, newname)
}

// Stat implements afero.Fs.
func (f *FaultFs) Stat(name string) (os.FileInfo, error) { return f.base.Stat(name) }

// LstatIfPossible implements afero.Lstater when the base does.
func (f *FaultFs) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	if l, ok := f.base.(afero.Lstater); ok {
		return l.LstatIfPossible(name)
	}
	fi, err := f.base.Stat(name)
	return fi, false, err
}

// Chmod implements afero.Fs.
func (f *FaultFs) Chmod(name string, mode os.FileMode) error { return f.base.Chmod(name, mode) }

// Chown implements afero.Fs.
func (f *FaultFs) Chown(name string, uid, gid int) error { return f.base.Chown(name, uid, gid) }

// Chtimes implements afero.Fs.
func (f *FaultFs) Chtimes(name string, atime, mtime time.Time) error {
	return f.base.Chtimes(name, atime, mtime)
}

// faultFile wraps a File of the base.
type faultFile struct {
	afero.File
	fs *FaultFs
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite); err != nil {
		return f.failWrite(p, err, f.File.Write)
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite); err != nil {
		return f.failWrite(p, err, func(b []byte) (int, error) { return f.File.WriteAt(b, off) })
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

// failWrite fails a write with err; an ENOSPC first writes half of p.
func (f *faultFile) failWrite(p []byte, err error, write func([]byte) (int, error)) (int, error) {
	n := 0
	if errors.Is(err, syscall.ENOSPC) && len(p) > 1 {
		var werr error
		if n, werr = write(p[:len(p)/2]); werr != nil {
			return n, werr
		}
	}
	return n, pathErr("write", f.Name(), err)
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.check(OpWrite); err != nil {
		return pathErr("truncate", f.Name(), err)
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	op := OpSync
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		op = OpSyncDir
	}
	if err := f.fs.check(op); err != nil {
		return pathErr("sync", f.Name(), err)
	}
	return f.File.Sync()
}
