package faultfs

import (
	"errors"
	"os"
	"sort"
	"syscall"
	"time"
)

// The namespace operations of CrashFs: they change what processes see at
// once, and what survives a crash only once the parent directory is synced.

// Mkdir implements afero.Fs.
func (c *CrashFs) Mkdir(name string, perm os.FileMode) error {
	if err := c.begin("mkdir %s", name); err != nil {
		return pathErr("mkdir", name, err)
	}
	defer c.mu.Unlock()
	return c.mkdir(name, perm)
}

func (c *CrashFs) mkdir(name string, perm os.FileMode) error {
	dir, base, err := c.parent(name)
	if err != nil {
		return pathErr("mkdir", name, err)
	}
	if _, ok := dir.entries[base]; ok {
		return pathErr("mkdir", name, syscall.EEXIST)
	}
	dir.entries[base] = newDir(perm, time.Now())
	return nil
}

// MkdirAll implements afero.Fs, as one operation.
func (c *CrashFs) MkdirAll(name string, perm os.FileMode) error {
	if err := c.begin("mkdirall %s", name); err != nil {
		return pathErr("mkdir", name, err)
	}
	defer c.mu.Unlock()
	p := ""
	for _, part := range split(name) {
		p += "/" + part
		n, err := c.lookup(p)
		switch {
		case err == nil && n.dir:
			continue
		case err == nil:
			return pathErr("mkdir", p, syscall.ENOTDIR)
		}
		if err := c.mkdir(p, perm); err != nil {
			return err
		}
	}
	return nil
}

// Remove implements afero.Fs.
func (c *CrashFs) Remove(name string) error {
	if err := c.begin("remove %s", name); err != nil {
		return pathErr("remove", name, err)
	}
	defer c.mu.Unlock()
	dir, base, err := c.parent(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := dir.entries[base]
	switch {
	case !ok:
		return pathErr("remove", name, syscall.ENOENT)
	case n.dir && len(n.entries) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.entries, base)
	return nil
}

// RemoveAll implements afero.Fs, as one operation.
func (c *CrashFs) RemoveAll(name string) error {
	if err := c.begin("removeall %s", name); err != nil {
		return pathErr("removeall", name, err)
	}
	defer c.mu.Unlock()
	dir, base, err := c.parent(name)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return pathErr("removeall", name, err)
	}
	delete(dir.entries, base)
	return nil
}

// Rename implements afero.Fs.
func (c *CrashFs) Rename(oldname, newname string) error {
	if err := c.begin("rename %s %s", oldname, newname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	defer c.mu.Unlock()
	fail := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	odir, obase, err := c.parent(oldname)
	if err != nil {
		return fail(err)
	}
	n, ok := odir.entries[obase]
	if !ok {
		return fail(syscall.ENOENT)
	}
	ndir, nbase, err := c.parent(newname)
	if err != nil {
		return fail(err)
	}
	if old, ok := ndir.entries[nbase]; ok && old != n {
		switch {
		case old.dir && !n.dir:
			return fail(syscall.EISDIR)
		case !old.dir && n.dir:
			return fail(syscall.ENOTDIR)
		case old.dir && len(old.entries) > 0:
			return fail(syscall.ENOTEMPTY)
		}
	}
	delete(odir.entries, obase)
	ndir.entries[nbase] = n
	return nil
}

// Stat implements afero.Fs.
func (c *CrashFs) Stat(name string) (fi os.FileInfo, err error) {
	err = c.at("stat", name, func(n *node) { fi = n.info(baseName(name)) })
	return fi, err
}

// Chmod implements afero.Fs.
func (c *CrashFs) Chmod(name string, mode os.FileMode) error {
	return c.at("chmod", name, func(n *node) { n.perm = mode & os.ModePerm })
}

// Chown implements afero.Fs; ownership is not modelled.
func (c *CrashFs) Chown(name string, _, _ int) error {
	return c.at("chown", name, func(*node) {})
}

// Chtimes implements afero.Fs.
func (c *CrashFs) Chtimes(name string, _ time.Time, mtime time.Time) error {
	return c.at("chtimes", name, func(n *node) { n.mtime = mtime })
}

// at is one operation op on the node at name.
func (c *CrashFs) at(op, name string, fn func(n *node)) error {
	if err := c.begin("%s %s", op, name); err != nil {
		return pathErr(op, name, err)
	}
	defer c.mu.Unlock()
	n, err := c.lookup(name)
	if err != nil {
		return pathErr(op, name, err)
	}
	fn(n)
	return nil
}

// names returns a directory's entry names, sorted.
func (n *node) names() []string {
	out := make([]string, 0, len(n.entries))
	for k := range n.entries {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
