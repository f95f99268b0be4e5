package cache

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// A record file is a short sequence of entries: one self-checking envelope
// per line, the newest last; the first is a full snapshot of the record, later ones are
// full snapshots or deltas on the line before (delta.go).
//
// Why entries and not only a durable replace: an ADD of n delegates makes
// n+1 durable writes. Measured on this project's disk (ext4, virtio) with
// `go test -run '^$' -bench Durable -benchtime 2000x ./cache`, a ~2 KB replace
// (temp file, fsync, rename, fsync of the dir) costs ~0.55 ms, and an append
// followed by fdatasync ~0.25 ms; inside a real ADD, where the delegates'
// own writes share the ext4 journal, the replaces cost ~1.1 ms each (4.5 ms of
// a 60 ms ADD). So the first write of a record creates it by a durable
// replace (the new directory entry needs the dir fsync anyway), and every
// later write adds an entry and fdatasyncs. The file is created
// preallocated and the entries overwrite its zeros in place
// (recordfile_slot.go): an append grows the file, so its fdatasync waits for
// an ext4 journal commit, which under 50 concurrent ADDs queues behind the
// whole node's metadata changes.
//
// Crash safety: a write that a crash tears leaves a final line that does
// not verify. It was never acknowledged, so the engine never acted on it, and
// Load takes the record as of the entry before it. Save never writes after
// a partial line: if the entries do not end in a newline, or have grown past
// compactAt, it compacts by durably replacing the file with a full snapshot
// alone. Entries after the first are usually deltas (delta.go): Load replays
// them from the newest full snapshot, so its cost stays that of reading a
// file of at most compactAt plus one entry.
const compactAt = 64 << 10

// saveEntry durably writes the newest entry of the record file at path: delta
// (if not nil) when the file is still exactly base, the file as this
// process last wrote it, else the record's snapshot, which full encodes. It returns the
// file's signature after the write. A new file is preallocated for a record of
// steps delegates (recordfile_slot.go).
func saveEntry(fsys afero.Fs, path string, full func() ([]byte, error), delta []byte, base fileSig, steps int) (fileSig, error) {
	sig, written, err := writeEntry(fsys, path, full, delta, base)
	if err != nil || written {
		return sig, err
	}
	data, err := full()
	if err != nil {
		return fileSig{}, err
	}
	fi, err := fileutil.WriteFileDurableInfo(fsys, path, padded(data, steps))
	if err != nil {
		return fileSig{}, err
	}
	return sigOf(fi, int64(len(data))), nil
}

// datasync flushes f's data (and the size it implies) with fdatasync where
// the file is a real one, else with Sync.
func datasync(f afero.File) error {
	return fileutil.SyncFile(f, true)
}

// decodeRecordFile replays a record file: from its newest full snapshot that
// verifies, each later line (a delta) applies on the record so far. Only
// the final line may fail, and only if it is a torn append; an entry from a
// future schema is never skipped. With no snapshot that verifies, the error
// is that of the final line.
func decodeRecordFile(data []byte) (*Record, error) {
	data, err := unpad(data)
	if err != nil {
		return nil, err
	}
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
			return nil, fmt.Errorf("line %d: %w", i+1, err)
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
// write, i.e. a strict prefix of an entry and its newline: an entry is
// written by one write whose last byte is the newline, and JSON has no raw
// newline. A line that ends in a newline, a complete entry followed by one
// stray byte, or a line that does not start as every entry does, was not
// cut short by a crash but damaged: skipping it could resurrect a snapshot
// older than what the engine acted on, so it is corruption.
func torn(line []byte) bool {
	if bytes.HasSuffix(line, []byte("\n")) {
		return false
	}
	start := []byte(`{"schema":`)
	if !bytes.HasPrefix(line, start) && !bytes.HasPrefix(start, line) {
		return false
	}
	return verifyEntry(line[:len(line)-1]) != nil
}
