package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resum re-renders an envelope line of field with body, its checksum
// computed over body as given, and the schema text as given.
func resum(schema, field string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(`{"schema":` + schema + `,"sha256":"` + hex.EncodeToString(sum[:]) + `","` + field + `":` + string(body) + "}\n")
}

// bodyOf is the body of a canonical line of field.
func bodyOf(t *testing.T, line []byte, field string) []byte {
	t.Helper()
	_, _, body, ok := splitEnvelope(line, field)
	require.True(t, ok, "not canonical: %s", line)
	return body
}

// TestCanonicalEnvelopeAgrees: the shortcut takes the lines a catena
// writes and nothing else, and Decode and parseDelta answer every line as
// their general path does: the same record, or the same error.
func TestCanonicalEnvelopeAgrees(t *testing.T) {
	snap := mustEncode(t, sampleRecord(testKey("abc")))
	file := deltaRecordFile(t)
	delta := file[bytes.LastIndexByte(file[:len(file)-1], '\n')+1:]
	sb, db := bodyOf(t, snap, "record"), bodyOf(t, delta, "delta")
	upper := func(line []byte) []byte {
		i := bytes.Index(line, []byte(`"sha256":"`)) + len(`"sha256":"`)
		out := bytes.Clone(line)
		copy(out[i:], strings.ToUpper(string(line[i:i+64])))
		return out
	}
	tests := []struct {
		name      string
		field     string // "record": Decode; "delta": parseDelta
		line      []byte
		wantTaken bool
	}{
		{name: "snapshot", field: "record", line: snap, wantTaken: true},
		{name: "snapshot without its newline", field: "record", line: bytes.TrimSuffix(snap, []byte("\n")), wantTaken: true},
		{name: "delta", field: "delta", line: delta, wantTaken: true},
		{name: "delta without its newline", field: "delta", line: bytes.TrimSuffix(delta, []byte("\n")), wantTaken: true},
		{name: "space before the body, summed with it", field: "record", line: resum("1", "record", append([]byte(" "), sb...))},
		{name: "newline after the body, summed with it", field: "record", line: resum("1", "record", append(bytes.Clone(sb), '\n'))},
		{name: "tab before a delta body, summed with it", field: "delta", line: resum("2", "delta", append([]byte("\t"), db...))},
		{name: "schema with a leading zero", field: "record", line: resum("01", "record", sb)},
		{name: "schema as a float", field: "record", line: resum("1.0", "record", sb)},
		{name: "schema too long", field: "record", line: resum("10000", "record", sb)},
		{name: "future schema", field: "record", line: resum("3", "record", sb)},
		{name: "delta schema on a snapshot", field: "record", line: resum("2", "record", sb)},
		{name: "snapshot schema on a delta", field: "delta", line: resum("1", "delta", db)},
		{name: "a delta where a snapshot goes", field: "record", line: delta},
		{name: "a snapshot where a delta goes", field: "delta", line: snap},
		{name: "checksum in upper case", field: "record", line: upper(snap)},
		{name: "two newlines", field: "record", line: append(bytes.Clone(snap), '\n')},
		{name: "null body", field: "record", line: resum("1", "record", []byte("null"))},
		{name: "null delta", field: "delta", line: resum("2", "delta", []byte("null"))},
		{name: "bytes after the body", field: "record", line: resum("1", "record", append(bytes.Clone(sb), []byte(`,"x":1`)...))},
		{name: "body not an object", field: "record", line: resum("1", "record", []byte(`[1,2]`))},
		{name: "flipped byte in the body", field: "record", line: bytes.Replace(snap, []byte(`"bridge"`), []byte(`"bridgf"`), 1)},
		{name: "empty", field: "record", line: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.field == "record" {
				fast, taken := decodeCanonical(tc.line)
				assert.Equal(t, tc.wantTaken, taken)
				got, err := Decode(tc.line)
				want, wantErr := decodeGeneral(tc.line)
				assert.Equal(t, want, got)
				assert.Equal(t, wantErr, err)
				if taken {
					require.NoError(t, wantErr)
					assert.Equal(t, want, fast)
				}
				return
			}
			fast, taken := parseDeltaCanonical(tc.line)
			assert.Equal(t, tc.wantTaken, taken)
			got, err := parseDelta(tc.line)
			want, wantErr := parseDeltaGeneral(tc.line)
			assert.Equal(t, want, got)
			assert.Equal(t, wantErr, err)
			if taken {
				require.NoError(t, wantErr)
				assert.Equal(t, want, fast)
			}
		})
	}
}

// TestIndexNonZero: the first byte after the padding that is not a zero,
// whatever it is (not only a valid UTF-8 start).
func TestIndexNonZero(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want int
	}{
		{name: "empty", in: nil, want: -1},
		{name: "zeros", in: make([]byte, 4096), want: -1},
		{name: "first", in: []byte{'{', 0}, want: 0},
		{name: "after zeros", in: append(make([]byte, 600), 'x'), want: 600},
		{name: "a continuation byte", in: append(make([]byte, 3), 0x80, 0), want: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, indexNonZero(tc.in))
		})
	}
}
