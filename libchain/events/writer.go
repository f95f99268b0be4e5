package events

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/fileutil"
)

// The journal's files: <cacheDir>/events/events.jsonl, rotated to
// events.jsonl.1 once it reaches rotateSize, so that at most about twice
// that is kept.
const (
	dirName    = "events"
	fileName   = "events.jsonl"
	rotateSize = 4 << 20
)

// MaxLine bounds one line of the journal, without its newline: Append
// never writes a longer one (encode shrinks the operation to fit), and
// the line reader of Read and Tail reads lines up to it and counts a
// longer one as unreadable.
const MaxLine = 64 << 10

// Path is where the journal of cacheDir lives; the rotated file is Path
// with ".1" appended.
func Path(cacheDir string) string {
	return filepath.Join(cacheDir, dirName, fileName)
}

// Writer appends Ops to the journal of one cache dir.
type Writer struct {
	CacheDir string
	// Fs is the filesystem the journal is written on: nil for the OS's.
	// Either way it is reached through fileutil.TrustedFs rooted at
	// CacheDir, which returns a TrustedFs of that root as it is.
	Fs afero.Fs
}

// OnOp returns the engine's hook (libchain.Engine.OnOp) that appends each
// operation to the journal of cacheDir on fsys (nil: the OS's); a failure
// to write is logged on log, never returned: the journal is
// observability, and an operation never fails for it.
func OnOp(fsys afero.Fs, cacheDir string, log *slog.Logger) func(Op) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Writer{CacheDir: cacheDir, Fs: fsys}
	return func(op Op) {
		if err := j.Append(op); err != nil {
			log.Warn("event journal", "error", err)
		}
	}
}

// Append writes op as one line of at most MaxLine bytes (encode)
// with a single O_APPEND write, so lines of concurrent catena processes
// never interleave. The journal is reached like the records
// (fileutil.TrustedFs): events/ and the file must be Catena's own and only
// writable by it, and no symlink is followed.
func (j *Writer) Append(op Op) error {
	line, err := encode(op, MaxLine)
	if err != nil {
		return fmt.Errorf("event journal: %w", err)
	}
	fsys := j.Fs
	if fsys == nil {
		fsys = afero.NewOsFs()
	}
	fsys = fileutil.TrustedFs(fsys, j.CacheDir)
	path := Path(j.CacheDir)
	if err := fsys.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("event journal: %w", err)
	}
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("event journal: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := checkJournal(f, path)
	if err != nil {
		return fmt.Errorf("event journal: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		return fmt.Errorf("event journal: write %s: %w", path, err)
	}
	if fi.Size()+int64(len(line)) < rotateSize {
		return nil
	}
	return rotate(fsys, f, path)
}

// rotate renames a full journal to .1, durably (fileutil.RenameDurable
// fsyncs events/), under an exclusive flock on it, and
// only if path still names that file, so that two processes racing to rotate
// rename once. A writer that still holds the old file appends to .1: nothing
// is lost.
func rotate(fsys afero.Fs, f afero.File, path string) error {
	osf, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return nil
	}
	fd := int(osf.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // another process is rotating it
	}
	defer func() { _ = unix.Flock(fd, unix.LOCK_UN) }()
	var fdSt unix.Stat_t
	if unix.Fstat(fd, &fdSt) != nil {
		return nil
	}
	fi, err := fsys.Stat(path) // never follows a link
	if err != nil {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Ino != fdSt.Ino || st.Dev != fdSt.Dev {
		return nil // already rotated
	}
	if err := fileutil.RenameDurable(fsys, path, path+".1"); err != nil {
		return fmt.Errorf("event journal: rotate %s: %w", path, err)
	}
	return nil
}

// checkJournal refuses a journal file that another user could have written.
func checkJournal(f afero.File, path string) (os.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	return fi, fileutil.CheckPrivateFile(path, fi)
}
