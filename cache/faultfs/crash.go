package faultfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/afero"
)

// ErrCrashed is what every operation returns once the machine has crashed
// and the frozen callers are released.
var ErrCrashed = errors.New("faultfs: the machine crashed")

// node is a file or a directory (an inode: several names may reach it
// while a rename is not yet durable).
type node struct {
	dir   bool
	perm  os.FileMode
	mtime time.Time
	// data is the file content processes see; synced is the content as of
	// the last Sync, what a power loss keeps.
	data, synced []byte
	// entries are the directory entries processes see; durable are the
	// entries as of the last Sync of the directory.
	entries, durable map[string]*node
}

func newDir(perm os.FileMode, now time.Time) *node {
	return &node{dir: true, perm: perm & os.ModePerm, mtime: now,
		entries: map[string]*node{}, durable: map[string]*node{}}
}

// CrashFs is an in-memory afero.Fs that tracks durability. Every call of
// the Fs or of a File counts as one operation. CrashAfter(n) lets n
// operations complete; the next one crashes the machine: it calls the
// crash hook, and it and every later call block until Release, then fail
// with ErrCrashed. Nothing changes after the crash, so Image sees the
// instant of the crash.
type CrashFs struct {
	mu      sync.Mutex
	root    *node
	ops     int
	limit   int // operations allowed before the crash; -1: no crash
	onCrash func()
	down    bool
	crashed chan struct{}
	release chan struct{}
	relOnce sync.Once
	trace   []string
	lies    bool
}

var _ afero.Fs = (*CrashFs)(nil)

// NewCrashFs returns an empty filesystem (its root directory exists and is
// durable) that never crashes until CrashAfter is called.
func NewCrashFs() *CrashFs {
	return &CrashFs{root: newDir(0o755, time.Now()), limit: -1,
		crashed: make(chan struct{}), release: make(chan struct{})}
}

// CrashAfter lets operations 1..n (counted from the creation of the fs)
// complete and crashes the machine at operation n+1.
// onCrash, if not nil, runs once, at the crash, before any frozen call
// returns; it must not use the fs.
func (c *CrashFs) CrashAfter(n int, onCrash func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit, c.onCrash = n, onCrash
}

// LieAboutSync makes every later Sync succeed without making anything
// durable, as a disk with a volatile write cache that ignores flushes
// does. Tests use it to show that a crash test catches a missing sync.
func (c *CrashFs) LieAboutSync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lies = true
}

// Ops returns how many operations have completed.
func (c *CrashFs) Ops() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// Trace returns a description of every completed operation, in order.
func (c *CrashFs) Trace() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.trace...)
}

// Crashed is closed when the machine crashes.
func (c *CrashFs) Crashed() <-chan struct{} { return c.crashed }

// Release lets the calls frozen by the crash return ErrCrashed. Calling it
// more than once is fine.
func (c *CrashFs) Release() { c.relOnce.Do(func() { close(c.release) }) }

// begin counts one operation and returns with c.mu held; or, if this
// operation crashes the machine (or it already crashed), blocks until
// Release and returns ErrCrashed without c.mu.
func (c *CrashFs) begin(what string, args ...any) error {
	c.mu.Lock()
	if !c.down && (c.limit < 0 || c.ops < c.limit) {
		c.ops++
		c.trace = append(c.trace, fmt.Sprintf(what, args...))
		return nil
	}
	if !c.down {
		c.down = true
		if c.onCrash != nil {
			c.onCrash()
		}
		close(c.crashed)
	}
	c.mu.Unlock()
	<-c.release
	return ErrCrashed
}

func pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

// baseName is the final component of name ("/" for the root).
func baseName(name string) string { return path.Base(path.Clean("/" + name)) }

// split cleans name (relative names are taken from the root) and returns
// its components; the root has none.
func split(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// lookup resolves name; c.mu must be held.
func (c *CrashFs) lookup(name string) (*node, error) {
	n := c.root
	for _, part := range split(name) {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		next, ok := n.entries[part]
		if !ok {
			return nil, syscall.ENOENT
		}
		n = next
	}
	return n, nil
}

// parent resolves the directory that holds name and returns it with the
// final component; c.mu must be held.
func (c *CrashFs) parent(name string) (*node, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", syscall.EBUSY // the root has no parent entry
	}
	dir, err := c.lookup("/" + strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", syscall.ENOTDIR
	}
	return dir, parts[len(parts)-1], nil
}

// Name implements afero.Fs.
func (c *CrashFs) Name() string { return "CrashFs" }

// Create implements afero.Fs.
func (c *CrashFs) Create(name string) (afero.File, error) {
	return c.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open implements afero.Fs.
func (c *CrashFs) Open(name string) (afero.File, error) {
	return c.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile implements afero.Fs.
func (c *CrashFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if err := c.begin("open %s %#x", name, flag); err != nil {
		return nil, pathErr("open", name, err)
	}
	defer c.mu.Unlock()
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	n, err := c.lookup(name)
	switch {
	case errors.Is(err, syscall.ENOENT) && flag&os.O_CREATE != 0:
		dir, base, perr := c.parent(name)
		if perr != nil {
			return nil, pathErr("open", name, perr)
		}
		n = &node{perm: perm & os.ModePerm, mtime: time.Now()}
		dir.entries[base] = n
	case err != nil:
		return nil, pathErr("open", name, err)
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, syscall.EEXIST)
	case n.dir && writable:
		return nil, pathErr("open", name, syscall.EISDIR)
	case flag&os.O_TRUNC != 0 && writable:
		n.data, n.mtime = nil, time.Now()
	}
	return &crashFile{fs: c, n: n, name: name, flag: flag}, nil
}
