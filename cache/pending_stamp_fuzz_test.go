package cache

import (
	"testing"
	"time"
)

// FuzzParseStamp checks the parser of a network's retry stamp
// (pending/<network>/.due), which a crash can tear and which is read by
// every ADD and DEL that has pending teardowns on its network: it never
// panics, accepts nothing longer than a note, and a stamp it accepts
// encodes back to content that parses to the same stamp. `go test` replays
// testdata/fuzz/FuzzParseStamp.
func FuzzParseStamp(f *testing.F) {
	f.Add([]byte("v1 1795464253000000000 1795464250123456789\n"))
	f.Add([]byte("v1 0 0\n"))
	f.Add([]byte("v1 9223372036854775807 9223372036854775807\n"))
	f.Add([]byte("v1 1 2"))
	f.Add([]byte("v1 -1 1\n"))
	f.Add([]byte("v2 1 2\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseStamp(data)
		if err != nil {
			if st != (RetryStamp{}) {
				t.Fatalf("refused %q but gave %+v", data, st)
			}
			return
		}
		if len(data) > maxNoteSize {
			t.Fatalf("accepted %d bytes", len(data))
		}
		if st.DirMtime < 0 || st.Next.Before(time.Unix(0, 0)) {
			t.Fatalf("%q gave an out-of-range stamp %+v", data, st)
		}
		enc := encodeStamp(st)
		back, err := parseStamp(enc)
		if err != nil || !back.Next.Equal(st.Next) || back.DirMtime != st.DirMtime {
			t.Fatalf("%q: %+v encodes as %q, which parses as %+v (%v)", data, st, enc, back, err)
		}
	})
}
