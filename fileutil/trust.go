package fileutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Trust: Catena acts on a file only if nobody but its own user could have
// written it. Every directory of a trusted tree (the cache dir itself,
// records/, records/<network>/, locks/..., pending/..., events/,
// quarantine/; the libcni results dir) and every file Catena reads back
// (records, lock files, the event journal, libcni cache entries) must be
// owned by Catena's effective uid and not writable by group or others, and
// no symlink is ever followed under the tree's root. Anything else is an
// *UntrustedError, wrapping ErrUntrusted: the operation stops, acting on no
// record, and the error names the path, its owner and mode, and the fix.
//
// The checks need an owner, so they apply to what the real disk reports
// (a FileInfo whose Sys() is a *syscall.Stat_t); afero.MemMapFs and the
// fault-injecting filesystems of the tests have no owners and pass.

// ErrUntrusted: an entry of a trusted tree could have been written by
// another user, or is a symlink where a directory must be. Its text, and
// UntrustedError's, speak of the cache dir, the tree most of them are in.
var ErrUntrusted = errors.New("untrusted entry in the cache dir")

// UntrustedError says which entry of a trusted tree is not trusted, and why.
type UntrustedError struct {
	Path string
	// UID and Mode are the entry's owner and permission bits; UID is -1
	// if the entry could not be stat'ed.
	UID  int64
	Mode fs.FileMode
	// Why is what is wrong: "is owned by uid 65534, not catena's uid 0",
	// "is writable by group or others", "is a symlink"...
	Why string
	// Dir: the entry is (or must be) a directory.
	Dir bool
}

func (e *UntrustedError) Error() string {
	var fix string
	switch {
	case e.Mode&fs.ModeSymlink != 0:
		fix = "remove the symlink " + e.Path + " (catena creates what it needs)"
	case e.Dir:
		fix = fmt.Sprintf("check that nothing in it was planted, then chown %s %s and chmod 0700 %s", ownerSpec(), e.Path, e.Path)
	default:
		fix = fmt.Sprintf("remove %s if catena did not write it, else chown %s %s and chmod 0600 %s", e.Path, ownerSpec(), e.Path, e.Path)
	}
	return fmt.Sprintf("untrusted cache entry %s (owner uid %d, mode %s): it %s; catena acts on no record until it is fixed: %s",
		e.Path, e.UID, modeString(e.Mode), e.Why, fix)
}

func (e *UntrustedError) Unwrap() error { return ErrUntrusted }

// modeString renders permission bits as 0700, and the type of anything
// that is not a regular file or directory.
func modeString(m fs.FileMode) string {
	s := fmt.Sprintf("%#04o", m.Perm())
	if t := m.Type() &^ fs.ModeDir; t != 0 {
		s += " " + t.String()
	}
	return s
}

// ownerSpec is the owner:group the fix asks for: Catena's own.
func ownerSpec() string {
	if os.Geteuid() == 0 && os.Getegid() == 0 {
		return "root:root"
	}
	return strconv.Itoa(os.Geteuid()) + ":" + strconv.Itoa(os.Getegid())
}

// euid is Catena's effective uid, read once: a syscall per check would be
// a syscall per step of every walk.
var euid = sync.OnceValue(os.Geteuid)

// ownerOf returns the owner of fi, if the filesystem reports one.
func ownerOf(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// CheckOwned refuses an entry owned by another uid than Catena's. Entries
// without an owner (in-memory filesystems) pass.
func CheckOwned(path string, fi os.FileInfo) error {
	uid, ok := ownerOf(fi)
	if !ok || int(uid) == euid() {
		return nil
	}
	return &UntrustedError{Path: path, UID: int64(uid), Mode: fi.Mode(), Dir: fi.IsDir(),
		Why: fmt.Sprintf("is owned by uid %d, not catena's uid %d", uid, euid())}
}

// CheckTrustedDir refuses a directory of a trusted tree that another user
// could write: owned by another uid, writable by group or others, or not a
// directory at all (a symlink is never followed).
func CheckTrustedDir(path string, fi os.FileInfo) error {
	if err := CheckOwned(path, fi); err != nil {
		return err
	}
	uid, _ := ownerOf(fi)
	e := &UntrustedError{Path: path, UID: int64(uid), Mode: fi.Mode(), Dir: true}
	switch mode := fi.Mode(); {
	case mode&fs.ModeSymlink != 0:
		e.Why = "is a symlink where a directory must be"
	case !mode.IsDir():
		e.Why = "is not a directory (" + mode.Type().String() + ")"
	case mode.Perm()&0o022 != 0:
		if _, real := fi.Sys().(*syscall.Stat_t); !real {
			return nil
		}
		e.Why = "is writable by group or others"
	default:
		return nil
	}
	return e
}

// CheckPrivateFile refuses (*UntrustedError) a file Catena reads back (a
// lock file, the event journal, a libcni cache entry) that is not a
// regular file of its own that only it can write.
func CheckPrivateFile(path string, fi os.FileInfo) error {
	if err := CheckOwned(path, fi); err != nil {
		return err
	}
	uid, real := ownerOf(fi)
	if !real {
		return nil // an in-memory file of the tests
	}
	e := &UntrustedError{Path: path, UID: int64(uid), Mode: fi.Mode()}
	switch mode := fi.Mode(); {
	case !mode.IsRegular():
		e.Why = "is not a regular file (" + mode.Type().String() + ")"
	case mode.Perm()&0o022 != 0:
		e.Why = "is writable by group or others"
	default:
		return nil
	}
	return e
}
