package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// An entry after the first may be a delta instead of a full snapshot,
// so that an ADD of n delegates writes O(n) bytes rather than O(n^2):
//
//	{"schema":2,"sha256":"<hex of the delta bytes>","delta":{...}}
//
// The delta holds every top-level field of the record, and "steps" as a list
// as long as the record's, where a step that did not change since the
// previous entry is null and a changed one is written whole. A delta applies
// on the record the record file's earlier lines give; it never starts a file
// and never changes the number of steps (Save writes a full snapshot then).
const deltaSchema = 2

// maxSchema is the newest envelope schema this build reads.
const maxSchema = deltaSchema

// deltaEnvelope is the on-disk form of a delta entry.
type deltaEnvelope struct {
	Schema *int            `json:"schema"`
	SHA256 *string         `json:"sha256"`
	Delta  json.RawMessage `json:"delta"`
}

// deltaRecord is a delta's body: the record with Steps shadowed by the
// list of changed steps (null where unchanged).
type deltaRecord struct {
	Record
	Steps []json.RawMessage `json:"steps"`
}

// stepSums returns each step's encoded JSON and its digest.
func stepSums(rec *Record) ([][]byte, [][sha256.Size]byte, error) {
	raw := make([][]byte, len(rec.Steps))
	sums := make([][sha256.Size]byte, len(rec.Steps))
	for i := range rec.Steps {
		b, err := json.Marshal(&rec.Steps[i])
		if err != nil {
			return nil, nil, fmt.Errorf("encode record %s: step %d: %w", rec.Key, i, err)
		}
		raw[i], sums[i] = b, sha256.Sum256(b)
	}
	return raw, sums, nil
}

// encodeDelta renders rec as a delta entry against an entry whose steps had
// the digests prev (as long as rec.Steps). rec must already have passed
// Encode, which sets and validates it.
func encodeDelta(rec *Record, raw [][]byte, sums, prev [][sha256.Size]byte) ([]byte, error) {
	if len(prev) != len(rec.Steps) {
		return nil, fmt.Errorf("encode delta %s: %d steps, previous entry had %d", rec.Key, len(rec.Steps), len(prev))
	}
	d := deltaRecord{Record: *rec, Steps: make([]json.RawMessage, len(rec.Steps))}
	for i := range rec.Steps {
		if sums[i] != prev[i] {
			d.Steps[i] = raw[i]
		}
	}
	body, err := json.Marshal(&d)
	if err != nil {
		return nil, fmt.Errorf("encode delta %s: %w", rec.Key, err)
	}
	sum := sha256.Sum256(body)
	out := envelopeBytes(make([]byte, 0, len(body)+128), deltaSchema, "delta", hex.EncodeToString(sum[:]), body)
	return append(out, '\n'), nil
}

// parseDelta verifies a delta entry's envelope and checksum and returns its
// body; it does not apply it. A line in the canonical form takes a
// shortcut (envelope.go).
func parseDelta(data []byte) (*deltaRecord, error) {
	if d, ok := parseDeltaCanonical(data); ok {
		return d, nil
	}
	return parseDeltaGeneral(data)
}

// parseDeltaGeneral is parseDelta by encoding/json alone.
func parseDeltaGeneral(data []byte) (*deltaRecord, error) {
	var env deltaEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, corruptf("bad delta envelope: %v", err)
	}
	if env.Schema == nil || *env.Schema != deltaSchema {
		return nil, corruptf("delta envelope has no schema %d", deltaSchema)
	}
	if env.SHA256 == nil {
		return nil, corruptf("delta envelope has no checksum")
	}
	if len(env.Delta) == 0 || bytes.Equal(env.Delta, []byte("null")) {
		return nil, corruptf("delta envelope has no delta")
	}
	if err := verifyEnvelope(data, deltaSchema, "delta", *env.SHA256, env.Delta); err != nil {
		return nil, err
	}
	d := new(deltaRecord)
	if err := json.Unmarshal(env.Delta, d); err != nil {
		return nil, corruptf("bad delta: %v", err)
	}
	return d, nil
}

// applyDelta returns the record that d makes of cur; cur is not changed.
func applyDelta(cur *Record, d *deltaRecord) (*Record, error) {
	if d.Key != cur.Key {
		return nil, corruptf("delta of %s follows the record of %s", d.Key, cur.Key)
	}
	if d.Schema != cur.Schema {
		return nil, corruptf("delta record schema %d differs from %d", d.Schema, cur.Schema)
	}
	if len(d.Steps) != len(cur.Steps) {
		return nil, corruptf("delta has %d steps, the record %d", len(d.Steps), len(cur.Steps))
	}
	next := d.Record
	next.Steps = slices.Clone(cur.Steps)
	for i, raw := range d.Steps {
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		var s Step
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, corruptf("delta step %d: %v", i, err)
		}
		next.Steps[i] = s
	}
	if err := validateRecord(&next); err != nil {
		return nil, corruptf("record %s: %v", next.Key, err)
	}
	return &next, nil
}

// decodeEntry decodes one entry on top of cur, the record the
// earlier lines give (nil if none): a snapshot stands alone, a delta
// applies on cur.
func decodeEntry(cur *Record, line []byte) (*Record, error) {
	if !bytes.HasPrefix(line, []byte(`{"schema":2,`)) {
		return Decode(line)
	}
	d, err := parseDelta(line)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, corruptf("delta entry with no full snapshot before it")
	}
	return applyDelta(cur, d)
}

// verifyEntry reports whether line is, on its own, an entry that verifies
// (a snapshot that decodes, or a delta whose envelope and checksum hold).
func verifyEntry(line []byte) error {
	if !bytes.HasPrefix(line, []byte(`{"schema":2,`)) {
		_, err := Decode(line)
		return err
	}
	_, err := parseDelta(line)
	return err
}
