package cache

import (
	"bytes"
	"testing"
)

// FuzzParseNote checks the parser of pending-teardown markers, whose
// content anyone who can write the cache dir controls and a crash can tear:
// it never panics, reads no more than maxNoteSize bytes as a note, answers
// "due at once" for whatever it refuses, and a note it accepts encodes back
// to content that parses to the same note. `go test` replays
// testdata/fuzz/FuzzParseNote.
func FuzzParseNote(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("v1 1795464253000000000 3\n"))
	f.Add([]byte("v1 0 0\n"))
	f.Add([]byte("v1 9223372036854775807 1000000\n"))
	f.Add([]byte("v1 1795464253"))
	f.Add([]byte("v1 -1 +1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		note, err := ParseNote(data)
		if err != nil {
			if note != dueAtOnce() {
				t.Fatalf("refused %q but gave %+v, not due at once", data, note)
			}
			return
		}
		if len(data) > maxNoteSize {
			t.Fatalf("accepted %d bytes", len(data))
		}
		if note.Attempts < 0 || note.Attempts > maxNoteAttempts || note.Due.Before(dueAtOnce().Due) {
			t.Fatalf("%q gave an out-of-range note %+v", data, note)
		}
		enc := EncodeNote(note)
		back, err := ParseNote(enc)
		if err != nil || back != note {
			t.Fatalf("%q: %+v encodes as %q, which parses as %+v (%v)", data, note, enc, back, err)
		}
		if len(data) > 0 && !bytes.Equal(enc, data) && !bytes.Contains(data, []byte(" 0")) {
			// Only leading zeros make two contents of one note.
			t.Fatalf("%q and %q are one note %+v", data, enc, note)
		}
	})
}
