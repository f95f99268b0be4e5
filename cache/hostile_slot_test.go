package cache_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
)

// heldDels is the DEL calls that rec's held steps call for, newest first.
func (h *hostileRig) heldDels(t *testing.T) []string {
	t.Helper()
	rec, err := h.store.Load(h.req.Key())
	require.NoError(t, err)
	var want []string
	for i := len(rec.Steps) - 1; i >= 0; i-- {
		if rec.Steps[i].Held() {
			want = append(want, "DEL "+rec.Steps[i].Type)
		}
	}
	return want
}

// TestHostileRecordFileTornInPlace: the record file as an ADD leaves it is a
// preallocated file, its entries followed by zeros. A crash tearing the
// write of any entry in place leaves a prefix of it and the zeros after:
// Load gives the newest entry that verifies, and DEL tears down what it
// holds, whatever the byte the tear stopped at.
func TestHostileRecordFileTornInPlace(t *testing.T) {
	h := newHostileRig(t, afero.NewMemMapFs())
	full := h.add(t)
	end := bytes.IndexByte(full, 0)
	require.Positive(t, end, "the ADD's record file is preallocated")
	first := bytes.IndexByte(full, '\n') + 1
	for n := first; n <= end; n++ {
		msg := fmt.Sprintf("entries cut to %d of %d bytes, zeros to %d", n, end, len(full))
		data := make([]byte, len(full))
		copy(data, full[:n])
		h.place(t, data)
		want := h.heldDels(t)
		calls, q := h.del(t, msg)
		require.Empty(t, q, "%s: a torn entry is not corruption", msg)
		require.Equal(t, want, calls, msg)
	}
	t.Logf("%d tears of the entries' %d bytes in a %d-byte file: none quarantined, each torn down as its newest entry says", end-first+1, end, len(full))
}

// TestHostileRecordFilePaddingFlips flips one bit of every byte of the
// preallocated record file an ADD leaves, entries and zeros alike. A flip in
// an entry is found as before (the newest entry verifies, or the file is
// quarantined); a flip in the zeros makes the file corrupt too: the zeros
// can only change by a write that never finished or by damage, and a
// record that may be damaged is quarantined and every delegate gets its
// DEL, never read as shorter than it is.
func TestHostileRecordFilePaddingFlips(t *testing.T) {
	h := newHostileRig(t, afero.NewMemMapFs())
	full := h.add(t)
	end := bytes.IndexByte(full, 0)
	h.place(t, full)
	newest := h.heldDels(t)
	inPadding := 0
	for i := range full {
		data := bytes.Clone(full)
		data[i] ^= 1 << (i % 8)
		msg := fmt.Sprintf("bit %d of byte %d of %d (%q)", i%8, i, len(full), full[i])
		h.place(t, data)
		calls, q := h.del(t, msg)
		if i >= end {
			inPadding++
			require.NotEmpty(t, q, "%s: a flip in the zeros quarantines", msg)
		}
		if q != "" {
			got, err := afero.ReadFile(h.fs, q)
			require.NoError(t, err)
			require.Equal(t, data, got, msg)
			require.Equal(t, allDels, calls, msg)
			continue
		}
		require.Equal(t, newest, calls, msg)
	}
	t.Logf("%d flips, %d of them in the zeros after the entries", len(full), inPadding)
}

// TestHostileRecordFileTornSectors: a power loss during the in-place write of
// an entry can persist any subset of its 512-byte sectors, not only a
// prefix. For every entry written in place and every one of its sectors
// lost while the others persisted, Load gives the entry before, and DEL
// tears down what that one holds: never a quarantine, which would DEL
// every delegate of the current config instead of the cached ones.
func TestHostileRecordFileTornSectors(t *testing.T) {
	const sector = 512
	h := newHostileRig(t, afero.NewMemMapFs())
	full := h.add(t)
	end := bytes.IndexByte(full, 0)
	require.Positive(t, end, "the ADD's record file is preallocated")
	tears := 0
	for start := bytes.IndexByte(full, '\n') + 1; start < end; {
		stop := start + bytes.IndexByte(full[start:], '\n') + 1
		before := bytes.Clone(full)
		clear(before[start:])
		h.place(t, before)
		want := h.heldDels(t)
		for lo := start; lo < stop; lo = (lo/sector + 1) * sector {
			hi := min((lo/sector+1)*sector, stop)
			msg := fmt.Sprintf("entry at bytes %d-%d, bytes %d-%d lost", start, stop, lo, hi)
			data := bytes.Clone(full)
			clear(data[lo:hi])
			clear(data[stop:]) // the entries after it were never written
			h.place(t, data)
			calls, q := h.del(t, msg)
			require.Empty(t, q, "%s: a torn entry is not corruption", msg)
			require.Equal(t, want, calls, msg)
			tears++
		}
		start = stop
	}
	t.Logf("%d sector tears of the entries written in place: none quarantined, each torn down as the entry before says", tears)
}
