package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The on-disk form of a record is an envelope:
//
//	{"schema":1,"sha256":"<hex of the record bytes>","record":{...}}
//
// The checksum covers the exact bytes of the "record" value, so a torn or
// bit-flipped file is detected rather than misread. The schema is outside
// the checksummed part so that a record from a newer catena is recognised as
// such (ErrFutureSchema) even if a later schema changes the checksum.
type envelope struct {
	Schema *int            `json:"schema"`
	SHA256 *string         `json:"sha256"`
	Record json.RawMessage `json:"record"`
}

// Encode renders rec in its on-disk envelope. It sets rec.Schema to
// SchemaVersion. It refuses a record that Decode would refuse (invalid key,
// unknown phase or step state), so that nothing is saved that cannot be
// loaded back.
func Encode(rec *Record) ([]byte, error) {
	if rec == nil {
		return nil, errors.New("encode record: nil record")
	}
	rec.Schema = SchemaVersion
	if err := validateRecord(rec); err != nil {
		return nil, fmt.Errorf("encode record %s: %w", rec.Key, err)
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record %s: %w", rec.Key, err)
	}
	sum := sha256.Sum256(body)
	out := envelopeBytes(make([]byte, 0, len(body)+128), SchemaVersion, "record", hex.EncodeToString(sum[:]), body)
	return append(out, '\n'), nil
}

// envelopeBytes appends the canonical envelope, without its final newline;
// field is "record" (a snapshot) or "delta" (delta.go).
func envelopeBytes(out []byte, schema int, field, sum string, body []byte) []byte {
	out = append(out, `{"schema":`...)
	out = strconv.AppendInt(out, int64(schema), 10)
	out = append(out, `,"sha256":"`...)
	out = append(out, sum...)
	out = append(out, `","`...)
	out = append(out, field...)
	out = append(out, `":`...)
	out = append(out, body...)
	return append(out, '}')
}

// Decode parses and verifies an envelope written by Encode. It never panics.
// Any defect yields an error wrapping ErrCorrupt; a record from a newer
// schema yields an error wrapping both ErrCorrupt and ErrFutureSchema.
// A line in the canonical form takes a shortcut (envelope.go).
func Decode(data []byte) (*Record, error) {
	if rec, ok := decodeCanonical(data); ok {
		return rec, nil
	}
	return decodeGeneral(data)
}

// decodeGeneral is Decode by encoding/json alone.
func decodeGeneral(data []byte) (*Record, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, corruptf("empty record file")
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, corruptf("bad envelope: %v", err)
	}
	if env.Schema == nil {
		return nil, corruptf("envelope has no schema")
	}
	schema := *env.Schema
	if schema > maxSchema {
		return nil, fmt.Errorf("record schema %d, this catena reads up to %d: %w: %w",
			schema, maxSchema, ErrCorrupt, ErrFutureSchema)
	}
	if schema < 1 {
		return nil, corruptf("invalid schema %d", schema)
	}
	if schema > SchemaVersion {
		return nil, corruptf("schema %d is a delta entry, not a snapshot", schema)
	}
	if env.SHA256 == nil {
		return nil, corruptf("envelope has no checksum")
	}
	if len(env.Record) == 0 || bytes.Equal(env.Record, []byte("null")) {
		return nil, corruptf("envelope has no record")
	}
	if err := verifyEnvelope(data, schema, "record", *env.SHA256, env.Record); err != nil {
		return nil, err
	}
	rec := new(Record)
	if err := json.Unmarshal(env.Record, rec); err != nil {
		return nil, corruptf("bad record: %v", err)
	}
	if rec.Schema != schema {
		return nil, corruptf("record schema %d differs from envelope schema %d", rec.Schema, schema)
	}
	if err := validateRecord(rec); err != nil {
		return nil, corruptf("record %s: %v", rec.Key, err)
	}
	return rec, nil
}

// verifyEnvelope checks the checksum sum of body, and that data is the
// canonical envelope of it. The envelope itself is not checksummed: it must
// be byte for byte as Encode writes it (json.Unmarshal would take "SCHEMA"
// for "schema"), so that no flipped bit anywhere in the file goes unnoticed.
func verifyEnvelope(data []byte, schema int, field, sum string, body []byte) error {
	if len(sum) != hex.EncodedLen(sha256.Size) {
		return corruptf("malformed checksum %q", sum)
	}
	got := sha256.Sum256(body)
	if hex.EncodeToString(got[:]) != sum {
		return corruptf("%s checksum mismatch", field)
	}
	if !bytes.Equal(bytes.TrimSuffix(data, []byte("\n")), envelopeBytes(nil, schema, field, sum, body)) {
		return corruptf("%s envelope is not in canonical form", field)
	}
	return nil
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// validateRecord checks the fields every record must carry.
func validateRecord(rec *Record) error {
	if err := rec.Key.Validate(); err != nil {
		return fmt.Errorf("invalid key: %w", err)
	}
	switch rec.Phase {
	case PhaseAdding, PhaseComplete, PhaseTearingDown, PhaseNeedsTeardown:
	case "":
		return errors.New("missing phase")
	default:
		return fmt.Errorf("unknown phase %q", rec.Phase)
	}
	for i, s := range rec.Steps {
		switch s.State {
		case StepPending, StepStarting, StepAdded, StepAddFailed, StepUnknown,
			StepDelFailed, StepDeleted, StepAbandoned:
		case "":
			return fmt.Errorf("step %d: missing state", i)
		default:
			return fmt.Errorf("step %d: unknown state %q", i, s.State)
		}
	}
	return nil
}
