package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
)

// cacheDirCheck walks the cache dir without following symlinks: every dir
// must be 0700, every file 0600, all owned by uid, nothing a symlink or
// special file, and the dir writable.
func cacheDirCheck(dir string, uid int) check {
	const name = "cache dir"
	const hint = "chmod 0700 the dirs and 0600 the files, chown them to root, and replace symlinks with real dirs and files: catena refuses records it cannot trust"
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ok(name, dir+" does not exist yet: catena creates it on the first ADD")
	case err != nil:
		return problem(name, err.Error(), "check the path and its parents")
	case fi.Mode()&fs.ModeSymlink != 0:
		return problem(name, dir+" is a symlink", "make it a real directory: catena never follows a link out of its cache dir")
	case !fi.IsDir():
		return problem(name, dir+" is not a directory", "move it aside: catena needs a directory there")
	}
	var bad []string
	dirs, files := 0, 0
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			bad = append(bad, err.Error())
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile (a lock released, a temp file renamed)
		}
		if err != nil {
			bad = append(bad, err.Error())
			return nil
		}
		if why := modeProblem(fi, uid); why != "" {
			bad = append(bad, p+": "+why)
		}
		if fi.IsDir() {
			dirs++
		} else {
			files++
		}
		return nil
	})
	if walkErr != nil {
		bad = append(bad, walkErr.Error())
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		bad = append(bad, fmt.Sprintf("%s is not writable: %v", dir, err))
	}
	if len(bad) > 0 {
		return problem(name, fmt.Sprintf("%s: %d problem(s)", dir, len(bad)), hint, bad...)
	}
	return ok(name, fmt.Sprintf("%s: %d dir(s) 0700 and %d file(s) 0600, owned by uid %d", dir, dirs, files, uid))
}

// modeProblem says what is wrong with one entry of the cache dir, or "".
func modeProblem(fi fs.FileInfo, uid int) string {
	mode := fi.Mode()
	var why []string
	switch {
	case mode&fs.ModeSymlink != 0:
		return "is a symlink"
	case mode.IsDir():
		if mode.Perm() != 0o700 {
			why = append(why, fmt.Sprintf("mode %#o, want 0700", mode.Perm()))
		}
	case mode.IsRegular():
		if mode.Perm() != 0o600 {
			why = append(why, fmt.Sprintf("mode %#o, want 0600", mode.Perm()))
		}
	default:
		return fmt.Sprintf("is not a regular file or directory (%s)", mode.Type())
	}
	if st, isStat := fi.Sys().(*syscall.Stat_t); isStat && int(st.Uid) != uid {
		why = append(why, fmt.Sprintf("owned by uid %d, want %d", st.Uid, uid))
	}
	return strings.Join(why, ", ")
}

// recordsCheck finds records stuck in teardown: a record that is not
// complete and whose lock is free, so that no operation is running on it
// (a failed rollback or DEL, or an operation whose process died), and
// records that cannot be read.
func recordsCheck(cacheDir string) check {
	const name = "records"
	entries, err := loadEntries(cacheDir)
	if err != nil {
		return problem(name, err.Error(), "check that the cache dir is readable")
	}
	s := store(cacheDir)
	var stuck, unreadable []string
	complete, inFlight := 0, 0
	for _, e := range entries {
		if e.Err != nil {
			unreadable = append(unreadable, fmt.Sprintf("%s: %v", e.Key, e.Err))
			continue
		}
		if e.Rec.Phase == cache.PhaseComplete {
			complete++
			continue
		}
		st, err := cache.ProbeLock(lockPath(cacheDir, e.Key))
		if err != nil {
			stuck = append(stuck, fmt.Sprintf("%s: %v", e.Key, err))
			continue
		}
		if st.Held {
			inFlight++
			continue
		}
		// Read again with the lock seen free: the operation may have
		// finished since the first read.
		rec, err := s.Load(e.Key)
		switch {
		case errors.Is(err, cache.ErrNotFound):
			continue
		case err != nil:
			unreadable = append(unreadable, fmt.Sprintf("%s: %v", e.Key, err))
		case rec.Phase == cache.PhaseComplete:
			complete++
		default:
			stuck = append(stuck, describeStuck(rec))
		}
	}
	if len(stuck)+len(unreadable) == 0 {
		return ok(name, fmt.Sprintf("%d complete, %d in flight, none stuck in teardown", complete, inFlight))
	}
	var hints []string
	if len(stuck) > 0 {
		hints = append(hints, "run `catenactl repair` with the --conf of the record's network; if a delegate's DEL can never succeed "+
			"(its binary is gone), `catenactl repair --abandon <container> --delegate <index> --ifname <ifname>`")
	}
	if len(unreadable) > 0 {
		hints = append(hints, "the next DEL of an unreadable record's attachment moves it to quarantine/ and DELs every delegate best-effort")
	}
	detail := fmt.Sprintf("%d stuck in teardown, %d unreadable (%d complete, %d in flight)", len(stuck), len(unreadable), complete, inFlight)
	return problem(name, detail, strings.Join(hints, "; "), append(stuck, unreadable...)...)
}

// describeStuck says what a stuck record still holds and why.
func describeStuck(rec *cache.Record) string {
	msg := fmt.Sprintf("%s %s, %d teardown attempt(s)", rec.Key, rec.Phase, rec.TeardownAttempts)
	if held := heldSteps(rec); len(held) > 0 {
		msg += "; still held: " + strings.Join(held, "; ")
	}
	if rec.LastError != "" {
		msg += "; last error: " + rec.LastError
	}
	return msg
}

// locksCheck looks at every lock file: a lock held by a process that is
// gone, or for longer than lockTimeout, is a problem; each holder is
// reported as its lock file records it.
func locksCheck(cacheDir string, lockTimeout time.Duration, now time.Time) check {
	const name = "locks"
	paths, err := filepath.Glob(filepath.Join(cacheDir, cache.LocksDir, "*", "*.lock"))
	if err != nil {
		return problem(name, err.Error(), "")
	}
	var bad, running []string
	leftover := 0
	for _, p := range paths {
		st, err := cache.ProbeLock(p)
		switch {
		case err != nil:
			bad = append(bad, err.Error())
			continue
		case !st.Held:
			leftover++
			continue
		}
		item := fmt.Sprintf("%s held by %s", p, orDash(string(st.Raw)))
		h := st.Holder
		switch {
		case h == nil:
			running = append(running, item) // its holder has not written itself yet
		case !pidAlive(h.PID):
			bad = append(bad, item+fmt.Sprintf(": pid %d is gone, another process holds its file", h.PID))
		case now.Sub(h.Since) > lockTimeout:
			bad = append(bad, item+fmt.Sprintf(": held for %s, past lockTimeout %s", now.Sub(h.Since).Round(time.Second), lockTimeout))
		default:
			running = append(running, item)
		}
	}
	detail := fmt.Sprintf("%d held by running operations, %d left by holders that died (harmless: reused by the next operation)", len(running), leftover)
	if len(bad) > 0 {
		return problem(name, fmt.Sprintf("%d held too long or by a process that is gone; %s", len(bad), detail),
			"find the processes that have the lock file open (fuser -v <lock file>) and kill the one that hangs: the kernel releases a flock when the last process holding its file exits; meanwhile every operation on that attachment fails with code 11 after lockTimeout",
			bad...)
	}
	c := ok(name, detail)
	c.Items = running
	return c
}
