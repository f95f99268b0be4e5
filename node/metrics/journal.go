package metrics

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/libchain"
)

// JournalTail feeds the operations of a cache dir's event journal into the
// metrics, reading only what was appended since the last Poll. It follows
// the rotation of events.jsonl to events.jsonl.1: when the journal's inode
// changes, the rest of the old file is read from .1 (if .1 is that file)
// before the new one. A journal rotated twice between polls loses the
// middle file's lines. Any line that is not an operation (longer than
// libchain.MaxEventLine, which the journal's writer never writes, not JSON,
// or JSON of another shape) is skipped in bounded memory, counted and
// logged.
type JournalTail struct {
	CacheDir string
	Path     string // <cacheDir>/events/events.jsonl
	Metrics  *Metrics
	// Handle, when set, receives each operation instead of Metrics (which
	// may then be nil): the agent's Kubernetes events tail the journal so.
	Handle func(libchain.Op)
	// Unreadable, when set, counts the lines that are not an operation.
	Unreadable prometheus.Counter
	// Log, when set, gets one warning per Poll that skipped lines: how
	// many, and the first one's file, offset, size and why.
	Log *slog.Logger

	mu  sync.Mutex
	ino uint64
	off int64
	bad skipped // of the current Poll
}

// skipped is what a Poll skipped: how many lines, and the first one.
type skipped struct {
	n      int
	path   string
	offset int64
	size   int64
	why    string
}

// NewJournalTail tails the journal of cacheDir from its beginning (the
// rotated file first), counting what it cannot read in
// catena_event_journal_skipped_lines_total.
func NewJournalTail(cacheDir string, m *Metrics) *JournalTail {
	return &JournalTail{CacheDir: cacheDir, Path: libchain.EventsPath(cacheDir), Metrics: m, Unreadable: m.skippedLines}
}

// Poll reads what was appended since the last call.
func (j *JournalTail) Poll() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.bad = skipped{}
	defer j.logSkipped()
	cur, st, err := j.openJournal(j.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return j.drainRotated(j.ino == 0)
	}
	if err != nil {
		return err
	}
	defer func() { _ = cur.Close() }()
	if st.ino != j.ino {
		// Rotated (or first poll): finish the old file from .1.
		if err := j.drainRotated(j.ino == 0); err != nil {
			return err
		}
		j.ino, j.off = st.ino, 0
	}
	if st.size < j.off {
		j.off = 0 // truncated by hand
	}
	n, err := j.read(cur, j.Path, j.off)
	j.off += n
	return err
}

// logSkipped logs what the Poll skipped, once.
func (j *JournalTail) logSkipped() {
	if j.bad.n == 0 || j.Log == nil {
		return
	}
	j.Log.Warn("event journal: skipped lines that are not an operation", "lines", j.bad.n,
		"first", j.bad.path, "offset", j.bad.offset, "bytes", j.bad.size, "why", j.bad.why)
}

// drainRotated reads the rest of the previous journal from .1: all of it
// on the first poll, else only if .1 is the file last read. It then counts
// as the file last read, so a repeated call reads only what is new.
func (j *JournalTail) drainRotated(first bool) error {
	old, st, err := j.openJournal(j.Path + ".1")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = old.Close() }()
	if first {
		j.ino, j.off = st.ino, 0
	}
	if st.ino != j.ino {
		return nil // rotated again meanwhile: that file is lost to us
	}
	n, err := j.read(old, j.Path+".1", j.off)
	j.off += n
	return err
}

type fileInfo struct {
	ino  uint64
	size int64
}

// openJournal opens a journal file as libchain's reader does (trusted walk,
// no symlink, regular file of Catena's own) and returns its inode and size;
// a missing file is fs.ErrNotExist.
func (j *JournalTail) openJournal(path string) (afero.File, fileInfo, error) {
	f, fi, err := libchain.OpenEventFile(afero.NewOsFs(), j.CacheDir, path)
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

// read consumes the complete lines of f (at path) from off and returns
// how many bytes they took: a line still being written (no newline yet)
// is left for the next poll.
func (j *JournalTail) read(f afero.File, path string, off int64) (int64, error) {
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("event journal: %w", err)
	}
	// Room for a line of MaxEventLine bytes and its newline.
	r := bufio.NewReaderSize(f, libchain.MaxEventLine+1)
	var used int64
	for {
		line, long, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return used, nil
			}
			return used, fmt.Errorf("event journal: %w", err)
		}
		at := off + used
		used += int64(len(line)) + long
		var op libchain.Op
		why := ""
		switch {
		case long > 0:
			why = fmt.Sprintf("longer than %d bytes", libchain.MaxEventLine)
		case json.Unmarshal(line, &op) != nil:
			why = "not the JSON of an operation"
		case op.Verb == "":
			why = "not an operation (no verb)"
		}
		if why != "" {
			j.skip(path, at, int64(len(line))+long, why)
			continue
		}
		if j.Handle != nil {
			j.Handle(op)
			continue
		}
		j.Metrics.ObserveOp(op)
	}
}

// readLine returns the next complete line (with its newline) that fits in
// r's buffer; a longer one is discarded and reported by how many bytes
// it had (line is then empty). io.EOF means no complete line is left.
func readLine(r *bufio.Reader) (line []byte, long int64, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case err == nil && long == 0:
			return chunk, 0, nil
		case err == nil:
			return nil, long + int64(len(chunk)), nil
		case errors.Is(err, bufio.ErrBufferFull):
			long += int64(len(chunk))
		default:
			return nil, 0, err // a partial last line waits for more
		}
	}
}

// skip counts one line that is not an operation, and keeps the Poll's
// first for its log.
func (j *JournalTail) skip(path string, offset, size int64, why string) {
	if j.Unreadable != nil {
		j.Unreadable.Inc()
	}
	if j.bad.n == 0 {
		j.bad = skipped{path: path, offset: offset, size: size, why: why}
	}
	j.bad.n++
}
