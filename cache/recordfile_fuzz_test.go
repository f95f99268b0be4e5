package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/spf13/afero"
)

// FuzzDecodeRecordFile checks the record file decoder: it never panics, every
// failure wraps ErrCorrupt, and what it accepts is the final entry, or the
// one before it only when the final line is torn (it does not end in a
// newline, or it holds the zeros of lost sectors); either way an entry that re-encodes to exactly its bytes.
// Load of the same bytes through a DiskStore agrees. `go test` replays
// testdata/fuzz/FuzzDecodeRecordFile.
func FuzzDecodeRecordFile(f *testing.F) {
	key := testKey("abc")
	rec := sampleRecord(key)
	var file []byte
	for i := range 3 {
		rec.TeardownAttempts = i
		file = append(file, mustEncode(f, rec)...)
	}
	f.Add(file)
	f.Add(file[:len(file)-1])
	f.Add(file[:len(file)-100])
	flipped := bytes.Clone(file)
	flipped[bytes.IndexByte(flipped, '\n')] = 'J'
	f.Add(flipped)
	f.Add(append(bytes.Clone(file[:bytes.IndexByte(file, '\n')+1]), make([]byte, 64)...))
	f.Add([]byte("\n\n"))
	deltas := deltaRecordFile(f)
	f.Add(deltas)
	f.Add(deltas[:len(deltas)-40])
	f.Add(deltas[bytes.IndexByte(deltas, '\n')+1:])
	torn := append(bytes.Clone(deltas), make([]byte, 1024)...) // its last delta torn by sectors
	first := bytes.LastIndexByte(deltas[:len(deltas)-1], '\n') + 1
	clear(torn[first:min((first/512+1)*512, len(deltas)-1)])
	f.Add(torn)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeRecordFile(data)
		if err != nil {
			if got != nil || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeRecordFile: %v, %v", got, err)
			}
		} else {
			checkFileEntries(t, data, got)
		}

		// Load agrees, once the key of the file is the key asked for.
		s := NewDiskStore(afero.NewMemMapFs(), "/c", NewMemLocker())
		want := key
		if got != nil {
			want = got.Key
		}
		if err := s.fs.MkdirAll(s.networkDir(want.Network), dirPerm); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(s.fs, s.recordPath(want), data, filePerm); err != nil {
			t.Fatal(err)
		}
		loaded, lerr := s.Load(want)
		switch {
		case err == nil && (lerr != nil || !bytes.Equal(mustEncode(t, loaded), mustEncode(t, got))):
			t.Fatalf("decodeRecordFile gave %s, Load gave %v", want, lerr)
		case err != nil && (lerr == nil || !errors.Is(lerr, ErrCorrupt)):
			t.Fatalf("decodeRecordFile: %v, Load: %v", err, lerr)
		}
	})
}

// checkFileEntries checks that rec is the final entry of data, or the one
// before a torn final line.
func checkFileEntries(t *testing.T, data []byte, rec *Record) {
	t.Helper()
	lines := bytes.SplitAfter(bytes.TrimRight(data, "\x00"), []byte("\n")) // the padding is no line
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	same := func(line []byte) bool {
		r, err := Decode(line)
		return err == nil && bytes.Equal(mustEncode(t, r), mustEncode(t, rec)) || sameDelta(t, line, rec)
	}
	last := lines[len(lines)-1]
	switch {
	case same(last):
	case len(lines) > 1 && same(lines[len(lines)-2]):
		if bytes.HasSuffix(last, []byte("\n")) && bytes.IndexByte(last, 0) < 0 {
			t.Fatalf("skipped a whole final line %q", last) // one with zeros can be torn by sectors
		}
	default:
		t.Fatalf("accepted %s, which is not the final entry of %q", rec.Key, data)
	}
}

// sameDelta reports whether line is a delta whose top-level fields and
// changed steps are exactly those of rec.
func sameDelta(t *testing.T, line []byte, rec *Record) bool {
	t.Helper()
	d, err := parseDelta(line)
	if err != nil || len(d.Steps) != len(rec.Steps) {
		return false
	}
	want := deltaRecord{Record: *rec, Steps: make([]json.RawMessage, len(rec.Steps))}
	for i, raw := range d.Steps {
		if len(raw) != 0 && !bytes.Equal(raw, []byte("null")) {
			if want.Steps[i], err = json.Marshal(&rec.Steps[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	body, err := json.Marshal(&want)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	return bytes.Equal(bytes.TrimSuffix(line, []byte("\n")), envelopeBytes(nil, deltaSchema, "delta", hex.EncodeToString(sum[:]), body))
}

// deltaRecordFile is a snapshot of a record followed by three deltas, each
// of one step going from pending to added.
func deltaRecordFile(tb testing.TB) []byte {
	tb.Helper()
	rec := sampleRecord(testKey("abc"))
	for i := range rec.Steps {
		rec.Steps[i].State = StepPending
	}
	out := mustEncode(tb, rec)
	_, prev, err := stepSums(rec)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range rec.Steps {
		rec.Steps[i].State = StepAdded
		mustEncode(tb, rec)
		raw, sums, err := stepSums(rec)
		if err != nil {
			tb.Fatal(err)
		}
		d, err := encodeDelta(rec, raw, sums, prev)
		if err != nil {
			tb.Fatal(err)
		}
		out, prev = append(out, d...), sums
	}
	return out
}
