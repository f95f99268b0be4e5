package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// Preallocated record files. A record file is created with its first entry
// followed by zeros, written (not fallocate'd: ext4 would then convert the
// unwritten extents on the first write, a metadata change), so that the
// following entries overwrite zeros in place: the file's size and blocks
// never change, and their fdatasync flushes data without waiting for an
// ext4 journal commit. Under 50 concurrent ADDs that commit is what each
// durable write queued behind (docs/notes/record-writes.md).
//
// Layout: entries, each ending in a newline, then only zero bytes up to
// the end of the file. JSON has no zero byte, so the first zero ends the
// entries. A write of an entry in place can be torn by a crash like an
// append: a prefix of the entry lands, the rest stays zero; Load reads it
// as a torn final line, and the next Save compacts. A non-zero byte after
// the first zero is damage (a bit flip in an entry, or in the padding) and
// makes the file corrupt rather than silently shorter.
//
// A record file whose zeros ran out (or that has none) takes its next
// entry appended at its end.

const (
	// slotPage is the unit files are preallocated in.
	slotPage = 4 << 10
	// slotPerStep is the room preallocated per delegate of the record: an
	// ADD writes the record whole once, then one delta per delegate
	// (about 1.2 KB each for the reference plugins); DEL and retries add
	// a few more. A 3-delegate chain's ADD writes 4.7 KB into 8 KiB.
	slotPerStep = 1536
)

// padded returns full, the first entry of the file of a record of steps
// delegates, followed by the zeros that preallocate the record file: room for
// one delta per delegate, in whole pages, at most compactAt (past which
// the next Save compacts anyway).
func padded(full []byte, steps int) []byte {
	size := roundUp(len(full)+slotPerStep*(steps+1), slotPage)
	if size > compactAt {
		size = max(compactAt, len(full))
	}
	out := make([]byte, size)
	copy(out, full)
	return out
}

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }

// unpad returns the entries of a record file: data up to its first zero byte,
// which must be followed by zeros only, or by the rest of a final entry
// torn by sectors (tornSectors).
func unpad(data []byte) ([]byte, error) {
	entries, _, err := unpadTorn(data)
	return entries, err
}

// unpadTorn is unpad, and reports whether non-zero bytes follow the
// entries as the later sectors of a torn final entry: then nothing may be
// written after the entries (the next Save compacts).
func unpadTorn(data []byte) ([]byte, bool, error) {
	end := bytes.IndexByte(data, 0)
	if end < 0 {
		return data, false, nil
	}
	i := indexNonZero(data[end:])
	if i < 0 {
		return data[:end], false, nil
	}
	if !tornSectors(data, end) {
		return nil, false, corruptf("byte %d: data after the zero padding that starts at byte %d", end+i, end)
	}
	return data[:end], true, nil
}

// indexNonZero is the index of the first byte of b that is not zero, or -1.
func indexNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// tornSector is the unit a disk persists atomically (4 KiB sectors are
// whole multiples of it).
const tornSector = 512

// tornSectors reports whether the bytes from the start of the final
// entry, the one the first zero (at end) falls in, to the last non-zero
// byte can be that entry written in place over zeros and torn by a power
// loss that persisted some of its sectors and not others: they end in the
// entry's newline, hold no other newline (one write of one entry, and
// JSON has no raw newline), and every run of zeros in them is whole lost
// sectors: it starts where the entry does or on a sector boundary, and
// ends on one. Such an entry was never synced, so never acted on; Load
// takes the record as of the entry before, as for a torn prefix. Anything
// else after the first zero (a zero inside a sector, a second entry, bytes
// after the newline) is damage.
func tornSectors(data []byte, end int) bool {
	start := bytes.LastIndexByte(data[:end], '\n') + 1
	last := len(data) - 1
	for data[last] == 0 {
		last--
	}
	if data[last] != '\n' || bytes.IndexByte(data[start:last], '\n') >= 0 {
		return false
	}
	for i := end; i < last; {
		if data[i] != 0 {
			i++
			continue
		}
		j := i
		for data[j] == 0 {
			j++
		}
		if (i != start && i%tornSector != 0) || j%tornSector != 0 {
			return false
		}
		i = j
	}
	return true
}

// writeEntry writes an entry into the record file at path and fdatasyncs it, if
// path is a record file that can take one: it exists, its entries end in a
// newline and stop before compactAt. The entry goes right after them: in
// place, over the zeros, or, where the zeros run out, extending the file.
// The entry is delta if the file, as fstat'ed and read through the handle
// that writes, is still base, else full. It reports false, with no error
// and nothing written, when the caller must replace the file instead.
func writeEntry(fsys afero.Fs, path string, full func() ([]byte, error), delta []byte, base fileSig) (fileSig, bool, error) {
	flags := os.O_RDWR // read: the entries' end, through the same handle
	if fileutil.IsRealDisk(fsys) {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := fsys.OpenFile(path, flags, filePerm)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || fileutil.IsSymlinkLoop(err) {
			return fileSig{}, false, nil // first write, or a link the replace will overwrite
		}
		return fileSig{}, false, fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fileSig{}, false, fmt.Errorf("stat %s: %w", path, err)
	}
	end, ok, err := entriesEnd(f, path, fi)
	if err != nil || !ok {
		_ = f.Close()
		return fileSig{}, false, err
	}
	data := delta
	if data == nil || !base.valid() || sigOf(fi, end) != base {
		if data, err = full(); err != nil {
			_ = f.Close()
			return fileSig{}, false, err
		}
	}
	if end+int64(len(data)) > maxRecordSize {
		_ = f.Close()
		return fileSig{}, false, nil
	}
	n, err := f.WriteAt(data, end)
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
		// The entry may now be partial: the next Save finds no newline
		// before the zeros and compacts, and Load ignores an entry that
		// does not verify.
		_ = f.Close()
		return fileSig{}, false, fmt.Errorf("write entry to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fileSig{}, false, fmt.Errorf("close %s: %w", path, err)
	}
	return sigOf(fi, end+int64(len(data))), true, nil
}

// entriesEnd returns where the entries of the open record file end, which is
// where the next entry goes, if it is a private regular file of ours whose
// entries end in a newline before compactAt, followed by zeros only. It
// reports false otherwise; a file over twice compactAt is not even read (it
// is compacted).
func entriesEnd(f afero.File, path string, fi os.FileInfo) (int64, bool, error) {
	if err := fileutil.CheckOwned(path, fi); err != nil {
		return 0, false, err
	}
	size := fi.Size()
	if checkRecordInfo(fi) != nil || size == 0 || size > 2*compactAt {
		return 0, false, nil
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("read %s: %w", path, err)
	}
	entries, torn, err := unpadTorn(data)
	if err != nil || torn || len(entries) == 0 || entries[len(entries)-1] != '\n' || len(entries) >= compactAt {
		return 0, false, nil //nolint:nilerr // damage: the replace rewrites it whole
	}
	return int64(len(entries)), true, nil
}
