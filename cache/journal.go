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

// A record file is a short journal: one envelope per line, each a complete,
// self-checking snapshot of the record, the newest last.
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
// Load takes the newest entry that verifies. Save never appends after a
// partial line: if the file does not end in a newline, or has grown past
// compactAt, it compacts by durably replacing the file with the new entry
// alone. Every entry is a full snapshot, so nothing needs replay.
const compactAt = 64 << 10

// saveEntry durably writes data (one envelope line) as the newest entry of
// the journal at path.
func saveEntry(fsys afero.Fs, path string, data []byte) error {
	appended, err := appendEntry(fsys, path, data)
	if err != nil || appended {
		return err
	}
	return writeFileDurable(fsys, path, data)
}

// appendEntry appends data and fdatasyncs it, if path is a journal that can
// take an append: it exists, ends in a newline and is smaller than compactAt.
// It reports false, with no error and nothing written, when the caller must
// replace the file instead.
func appendEntry(fsys afero.Fs, path string, data []byte) (bool, error) {
	flags := os.O_RDWR | os.O_APPEND // read: the last byte, through the same handle
	if isRealDisk(fsys) {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := fsys.OpenFile(path, flags, filePerm)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || isSymlinkLoop(err) {
			return false, nil // first write, or a link the replace will overwrite
		}
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	ok, err := appendable(f, path, len(data))
	if err != nil || !ok {
		_ = f.Close()
		return false, err
	}
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = datasync(f)
	}
	if err != nil {
		// The tail may now be partial: the next Save sees no final newline
		// and compacts, and Load ignores an entry that does not verify.
		_ = f.Close()
		return false, fmt.Errorf("append %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("close %s: %w", path, err)
	}
	return true, nil
}

// appendable reports whether the open journal is a private regular file
// of ours below compactAt whose last byte is a newline, and that stays
// within what Load reads once n more bytes are appended.
func appendable(f afero.File, path string, n int) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
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

// decodeJournal returns the newest entry of a journal that verifies. Only
// the final line may fail to verify, and only if it is a torn append; an
// entry from a future schema is never skipped. With no entry that verifies,
// the error is that of the final line.
func decodeJournal(data []byte) (*Record, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	if len(lines) == 0 {
		return Decode(data)
	}
	last := len(lines) - 1
	rec, err := Decode(lines[last])
	if err == nil || errors.Is(err, ErrFutureSchema) || last == 0 || !torn(lines[last]) {
		return rec, err
	}
	if prev, perr := Decode(lines[last-1]); perr == nil {
		return prev, nil
	}
	return nil, err
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
	_, err := Decode(line[:len(line)-1])
	return err != nil
}
