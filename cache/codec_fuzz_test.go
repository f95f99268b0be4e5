package cache

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode checks that Decode never panics, that every failure wraps
// ErrCorrupt, and that whatever it accepts is a valid record that survives
// another round trip; and that the canonical shortcut (envelope.go) takes a
// snapshot or a delta only where the general path accepts it, with the same
// result. `go test` replays testdata/fuzz/FuzzDecode; run
// `go test ./cache -run x -fuzz FuzzDecode` to search further.
func FuzzDecode(f *testing.F) {
	valid, err := Encode(sampleRecord(testKey("abc")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(bytes.TrimSuffix(valid, []byte("\n")))
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{})
	file := deltaRecordFile(f)
	delta := file[bytes.LastIndexByte(file[:len(file)-1], '\n')+1:]
	f.Add(delta)
	f.Add(resum("2", "delta", append([]byte(" "), delta[bytes.Index(delta, []byte(`"delta":`))+8:len(delta)-2]...)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if fast, ok := decodeCanonical(data); ok {
			want, err := decodeGeneral(data)
			if err != nil || !reflect.DeepEqual(fast, want) {
				t.Fatalf("the shortcut took a snapshot the general path decodes as %v, %v", want, err)
			}
		}
		if fast, ok := parseDeltaCanonical(data); ok {
			want, err := parseDeltaGeneral(data)
			if err != nil || !reflect.DeepEqual(fast, want) {
				t.Fatalf("the shortcut took a delta the general path parses as %v, %v", want, err)
			}
		}
		rec, err := Decode(data)
		if err != nil {
			if rec != nil {
				t.Fatalf("Decode returned a record with error %v", err)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if err := rec.Key.Validate(); err != nil {
			t.Fatalf("accepted an invalid key: %v", err)
		}
		if rec.Schema != SchemaVersion {
			t.Fatalf("accepted schema %d", rec.Schema)
		}
		first, err := Encode(rec)
		if err != nil {
			t.Fatalf("cannot re-encode an accepted record: %v", err)
		}
		again, err := Decode(first)
		if err != nil {
			t.Fatalf("cannot decode a re-encoded record: %v", err)
		}
		second, err := Encode(again)
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("round trip is not stable: %v\n%s\n%s", err, first, second)
		}
	})
}
