package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"syscall"

	"github.com/spf13/afero"
)

// Counter counts lines; a prometheus.Counter is one.
type Counter interface {
	Add(float64)
}

// Tail hands the operations of a cache dir's journal to Handle, reading
// only what was appended since the last Poll: the agent's metrics and its
// Kubernetes events read the journal so. It follows the rotation of
// events.jsonl to events.jsonl.1: when the journal's inode changes, the
// rest of the old file is read from .1 (if .1 is that file) before the
// new one. A journal rotated twice between polls loses the middle file's
// lines. A line still being written (no newline yet) waits for the next
// Poll. Any other line that is not an operation (decode) is skipped in
// bounded memory, counted and logged, as Read skips it.
type Tail struct {
	CacheDir string
	// Handle receives each operation, in the journal's order.
	Handle func(Op)
	// Unreadable, when set, counts the lines that are not an operation.
	Unreadable Counter
	// Log, when set, gets one warning per Poll that skipped lines
	// (Skipped.Log).
	Log *slog.Logger

	mu  sync.Mutex
	ino uint64
	off int64
}

// Poll reads what was appended since the last call: on the first, the
// whole journal, the rotated file first.
func (t *Tail) Poll() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var skipped Skipped
	defer func() {
		if t.Unreadable != nil && skipped.Lines > 0 {
			t.Unreadable.Add(float64(skipped.Lines))
		}
		skipped.Log(t.Log)
	}()
	path := Path(t.CacheDir)
	cur, st, err := t.open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t.drainRotated(t.ino == 0, &skipped)
	}
	if err != nil {
		return err
	}
	defer func() { _ = cur.Close() }()
	if st.ino != t.ino {
		// Rotated (or first poll): finish the old file from .1.
		if err := t.drainRotated(t.ino == 0, &skipped); err != nil {
			return err
		}
		t.ino, t.off = st.ino, 0
	}
	if st.size < t.off {
		t.off = 0 // truncated by hand
	}
	return t.read(cur, path, &skipped)
}

// drainRotated reads the rest of the previous journal from .1: all of it
// on the first poll, else only if .1 is the file last read. It then counts
// as the file last read, so a repeated call reads only what is new.
func (t *Tail) drainRotated(first bool, skipped *Skipped) error {
	path := Path(t.CacheDir) + ".1"
	old, st, err := t.open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = old.Close() }()
	if first {
		t.ino, t.off = st.ino, 0
	}
	if st.ino != t.ino {
		return nil // rotated again meanwhile: that file is lost to us
	}
	return t.read(old, path, skipped)
}

// read consumes the complete lines of f (at path) from t.off (readOps)
// and moves t.off past them.
func (t *Tail) read(f afero.File, path string, skipped *Skipped) error {
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return fmt.Errorf("event journal %s: %w", path, err)
	}
	n, err := readOps(f, path, t.off, false, skipped, t.Handle)
	t.off += n
	if err != nil {
		return fmt.Errorf("event journal %s: %w", path, err)
	}
	return nil
}

type fileInfo struct {
	ino  uint64
	size int64
}

// open opens a journal file as Read does (openFile) and returns its inode
// and size; a missing file is fs.ErrNotExist.
func (t *Tail) open(path string) (afero.File, fileInfo, error) {
	f, fi, err := openFile(afero.NewOsFs(), t.CacheDir, path)
	if err != nil {
		return nil, fileInfo{}, fmt.Errorf("event journal %s: %w", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		_ = f.Close()
		return nil, fileInfo{}, fmt.Errorf("event journal: %s has no inode", path)
	}
	return f, fileInfo{ino: st.Ino, size: fi.Size()}, nil
}
