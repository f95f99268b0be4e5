package events

import (
	"bytes"
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
// events.jsonl to events.jsonl.1.
//
// A file is the one last read only if it has that file's device and inode,
// is at least as long as what was read of it, and the bytes before the
// saved offset are still the end of the last line read (the anchor): the
// kernel reuses a freed inode, so a journal rotated twice between polls
// can have the old file's inode, and a file rewritten in place keeps it.
// When events.jsonl is not the file last read, the rest of that file is
// read from .1 if .1 is it, then the new events.jsonl from its start.
// When neither is (rotated twice between polls, or rewritten), the rest of
// the file last read is lost: .1 is read from its start (unless it is the
// file read before, which resumes where it stopped), then events.jsonl, and
// the loss is counted (Skipped.Unfollowed) and logged.
//
// A line still being written (no newline yet) waits for the next Poll. Any
// other line that is not an operation (decode) is skipped in bounded
// memory, counted and logged, as Read skips it.
type Tail struct {
	CacheDir string
	// Handle receives each operation, in the journal's order.
	Handle func(Op)
	// Unreadable, when set, counts the lines that are not an operation.
	Unreadable Counter
	// Log, when set, gets one warning per Poll that skipped lines or
	// could not follow the file last read (Skipped.Log).
	Log *slog.Logger

	mu      sync.Mutex
	started bool
	// pos is where the file last read was left; prev, where the one read
	// before it was (the rotated file, once the tail moved on).
	pos, prev position
}

// anchorLen is how many bytes before a position's offset identify the file:
// the end of the last line read, with its newline, a timestamp in it.
const anchorLen = 64

// position is a point in one journal file: its identity, how far it was
// read, and the bytes just before that (at most anchorLen).
type position struct {
	dev, ino uint64
	off      int64
	anchor   []byte
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
	cur, err := t.open(path)
	if err != nil {
		return err
	}
	defer cur.close()
	old, err := t.open(path + ".1")
	if err != nil {
		return err
	}
	defer old.close()

	switch {
	case !t.started:
		t.started = true
		if old.f != nil {
			if err := t.readFrom(old, position{}, &skipped); err != nil {
				return err
			}
		}
	case cur.f != nil && cur.is(t.pos):
		return t.readFrom(cur, t.pos, &skipped)
	case old.f != nil && old.is(t.pos):
		if err := t.readFrom(old, t.pos, &skipped); err != nil {
			return err
		}
	default:
		// The file last read is neither: what it got since is lost.
		if t.pos.ino != 0 {
			skipped.unfollowed(path)
		}
		if old.f != nil {
			from := position{}
			if old.is(t.prev) {
				from = t.prev
			}
			if err := t.readFrom(old, from, &skipped); err != nil {
				return err
			}
		}
	}
	if cur.f == nil {
		return nil
	}
	return t.readFrom(cur, position{}, &skipped)
}

// readFrom consumes the complete lines of j from p (readOps) and makes the
// result the tail's position, the one it leaves its previous.
func (t *Tail) readFrom(j journalFile, p position, skipped *Skipped) error {
	if p.ino != j.ino || p.dev != j.dev {
		p = position{dev: j.dev, ino: j.ino}
	}
	if _, err := j.f.Seek(p.off, io.SeekStart); err != nil {
		return fmt.Errorf("event journal %s: %w", j.path, err)
	}
	n, err := readOps(j.f, j.path, p.off, false, skipped, t.Handle)
	if n > 0 {
		p.off += n
		p.anchor = make([]byte, min(int64(anchorLen), p.off))
		if _, merr := j.f.ReadAt(p.anchor, p.off-int64(len(p.anchor))); merr != nil && err == nil {
			err = merr
		}
	}
	if t.pos.dev != p.dev || t.pos.ino != p.ino {
		t.prev = t.pos
	}
	t.pos = p
	if err != nil {
		return fmt.Errorf("event journal %s: %w", j.path, err)
	}
	return nil
}

// journalFile is an open journal file, or none (f is nil: it is missing).
type journalFile struct {
	f        afero.File
	path     string
	dev, ino uint64
	size     int64
}

func (j journalFile) close() {
	if j.f != nil {
		_ = j.f.Close()
	}
}

// is reports whether j is the file of p, as the doc of Tail says.
func (j journalFile) is(p position) bool {
	if p.ino == 0 || j.dev != p.dev || j.ino != p.ino || j.size < p.off {
		return false
	}
	if len(p.anchor) == 0 {
		return true
	}
	got := make([]byte, len(p.anchor))
	_, err := j.f.ReadAt(got, p.off-int64(len(got)))
	return err == nil && bytes.Equal(got, p.anchor)
}

// open opens a journal file as Read does (openFile) with its device,
// inode and size; a missing file is a journalFile without f.
func (t *Tail) open(path string) (journalFile, error) {
	f, fi, err := openFile(afero.NewOsFs(), t.CacheDir, path)
	if errors.Is(err, fs.ErrNotExist) {
		return journalFile{path: path}, nil
	}
	if err != nil {
		return journalFile{}, fmt.Errorf("event journal %s: %w", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		_ = f.Close()
		return journalFile{}, fmt.Errorf("event journal: %s has no inode", path)
	}
	return journalFile{f: f, path: path, dev: st.Dev, ino: st.Ino, size: fi.Size()}, nil
}
