package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// A record file is a short journal: one self-checking envelope per line, the
// newest last; the first is a full snapshot of the record, later ones are
// full snapshots or deltas on the line before (delta.go).
//
// Why a journal and not only a durable replace: an ADD of n delegates makes
// n+1 durable writes. Measured on this project's disk (ext4, virtio) with
// `go test -run '^$' -bench Durable -benchtime 2000x ./cache`, a ~2 KB replace
// (temp file, fsync, rename, fsync of the dir) costs ~0.55 ms, and an append
// followed by fdatasync ~0.25 ms; inside a real ADD, where the delegates'
// own writes share the ext4 journal, the replaces cost ~1.1 ms each (4.5 ms of
// a 60 ms ADD). So the first write of a record creates it by a durable
// replace (the new directory entry needs the dir fsync anyway), and every
// later write appends and fdatasyncs.
//
// Crash safety: an append that a crash tears leaves a final line that does
// not verify. It was never acknowledged, so the engine never acted on it, and
// Load takes the record as of the entry before it. Save never appends after
// a partial line: if the file does not end in a newline, or has grown past
// compactAt, it compacts by durably replacing the file with a full snapshot
// alone. Entries after the first are usually deltas (delta.go): Load replays
// them from the newest full snapshot, so its cost stays that of reading a
// file of at most compactAt plus one entry.
const compactAt = 64 << 10

// saveEntry durably writes the newest entry of the journal at path: delta
// (if not nil) when the file is still exactly base, the file as this
// process last wrote it, else full, the record's snapshot. It returns the
// file's mark after the write.
func saveEntry(fsys afero.Fs, path string, full, delta []byte, base fileMark) (fileMark, error) {
	mark, appended, err := appendEntry(fsys, path, full, delta, base)
	if err != nil || appended {
		return mark, err
	}
	fi, err := writeFileDurableInfo(fsys, path, full)
	if err != nil {
		return fileMark{}, err
	}
	return markOf(fi), nil
}

// appendEntry appends an entry and fdatasyncs it, if path is a journal that
// can take an append: it exists, ends in a newline and is smaller than
// compactAt. The entry is delta if the file, as fstat'ed through the handle
// that appends, is still base, else full. It reports false, with no error
// and nothing written, when the caller must replace the file instead.
func appendEntry(fsys afero.Fs, path string, full, delta []byte, base fileMark) (fileMark, bool, error) {
	flags := os.O_RDWR | os.O_APPEND // read: the last byte, through the same handle
	if isRealDisk(fsys) {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := fsys.OpenFile(path, flags, filePerm)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || isSymlinkLoop(err) {
			return fileMark{}, false, nil // first write, or a link the replace will overwrite
		}
		return fileMark{}, false, fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fileMark{}, false, fmt.Errorf("stat %s: %w", path, err)
	}
	data := full
	if delta != nil && base.valid() && markOf(fi) == base {
		data = delta
	}
	ok, err := appendable(f, path, fi, len(data))
	if err != nil || !ok {
		_ = f.Close()
		return fileMark{}, false, err
	}
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = datasync(f)
	}
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		// The tail may now be partial: the next Save sees no final newline
		// and compacts, and Load ignores an entry that does not verify.
		_ = f.Close()
		return fileMark{}, false, fmt.Errorf("append %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fileMark{}, false, fmt.Errorf("close %s: %w", path, err)
	}
	return markOf(fi), true, nil
}

// appendable reports whether the open journal is a private regular file
// of ours below compactAt whose last byte is a newline, and that stays
// within what Load reads once n more bytes are appended.
func appendable(f afero.File, path string, fi os.FileInfo, n int) (bool, error) {
	if err := checkOwned(path, fi); err != nil {
		return false, err
	}
	if checkRecordInfo(fi) != nil || fi.Size() == 0 || fi.Size() >= compactAt || fi.Size()+int64(n) > maxRecordSize {
		return false, nil
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return last[0] == '\n', nil
}

// datasync flushes f's data (and the size it implies) with fdatasync where
// the file is a real one, else with Sync.
func datasync(f afero.File) error {
	if osf, ok := f.(interface{ Fd() uintptr }); ok {
		for {
			err := unix.Fdatasync(int(osf.Fd()))
			if err != unix.EINTR {
				if err != nil {
					return fmt.Errorf("fdatasync: %w", err)
				}
				return nil
			}
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}

// decodeJournal replays a journal: from its newest full snapshot that
// verifies, each later line (a delta) applies on the record so far. Only
// the final line may fail, and only if it is a torn append; an entry from a
// future schema is never skipped. With no snapshot that verifies, the error
// is that of the final line.
func decodeJournal(data []byte) (*Record, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	if len(lines) == 0 {
		return Decode(data)
	}
	last := len(lines) - 1
	start, rec := lastSnapshot(lines)
	if rec == nil {
		err := verifyEntry(lines[last])
		if err == nil {
			err = corruptf("delta entry with no full snapshot before it")
		}
		return nil, err
	}
	for i := start + 1; i <= last; i++ {
		next, err := decodeEntry(rec, lines[i])
		if err != nil {
			if i == last && !errors.Is(err, ErrFutureSchema) && torn(lines[i]) {
				return rec, nil
			}
			return nil, fmt.Errorf("journal line %d: %w", i+1, err)
		}
		rec = next
	}
	return rec, nil
}

// lastSnapshot returns the newest line that is a full snapshot that
// verifies, and its record (nil if there is none). Only a line that starts
// as Encode writes a snapshot can be one.
func lastSnapshot(lines [][]byte) (int, *Record) {
	for i := len(lines) - 1; i >= 0; i-- {
		if !bytes.HasPrefix(lines[i], []byte(`{"schema":1,`)) {
			continue
		}
		if rec, err := Decode(lines[i]); err == nil {
			return i, rec
		}
	}
	return -1, nil
}

// torn reports whether a final line that does not verify can be a torn
// append, i.e. a strict prefix of an entry and its newline: an entry is
// appended by one write whose last byte is the newline, and JSON has no raw
// newline. A line that ends in a newline, or a complete entry followed by
// one stray byte, was written whole and then damaged: skipping it could
// resurrect a snapshot older than what the engine acted on, so it is
// corruption.
func torn(line []byte) bool {
	if bytes.HasSuffix(line, []byte("\n")) {
		return false
	}
	return verifyEntry(line[:len(line)-1]) != nil
}
