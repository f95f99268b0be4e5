package cache

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordFileTornSectors: a final entry written in place over zeros whose
// earlier sector was lost and later ones persisted (a power loss keeps any
// subset of an unsynced write's sectors) reads as a torn final entry, the
// record as of the entry before; a zero run that is not whole sectors, or
// anything after the entry's newline, is still damage.
func TestRecordFileTornSectors(t *testing.T) {
	const sector = 512
	key := testKey("c1")
	first := mustEncode(t, sampleRecord(key))
	next := sampleRecord(key)
	next.Phase = PhaseNeedsTeardown
	entry := mustEncode(t, next)
	require.Greater(t, len(entry), 3*sector, "the entry must span sectors")
	file := make([]byte, 4*len(entry))
	copy(file, first)
	copy(file[len(first):], entry)
	at := len(first)
	lostFrom := (at/sector + 1) * sector // the sector after the one the entry starts in
	lose := func(from, to int) []byte {
		out := bytes.Clone(file)
		clear(out[from:to])
		return out
	}
	tests := []struct {
		name    string
		data    []byte
		corrupt bool
	}{
		{"first sector lost, later ones kept", lose(at, lostFrom), false},
		{"a middle sector lost", lose(lostFrom, lostFrom+sector), false},
		{"zeros inside a sector", lose(lostFrom+1, lostFrom+sector), true},
		{"bytes after the newline", append(lose(at, lostFrom)[:len(file)-1], 'x'), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := decodeRecordFile(tt.data)
			if tt.corrupt {
				require.ErrorIs(t, err, ErrCorrupt)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, PhaseComplete, rec.Phase, "the record as of the entry before the torn one")
		})
	}
}
