package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// Every line a catena writes is in the canonical envelope form
// (envelopeBytes), and verifyEnvelope accepts no other. Decode and
// parseDelta therefore first take a line apart as that form, by its fixed
// layout, and decode only its body with encoding/json: decoding the
// envelope with encoding/json too scans the whole line twice more (its
// validation, then skipping the body into a RawMessage), about a third of
// a record's decode, and Load runs on every CHECK, DEL and GC.
//
// This is a shortcut, not a second parser: a line it does not take (any
// defect, any form other than the canonical one) goes to the general path
// (json.Unmarshal of the envelope, then verifyEnvelope), whose result and
// error are what they always were. Where it does take a line, the general
// path returns the same: the line is then
// {"schema":N,"sha256":"H","<field>":B} with N written as strconv writes
// it, H the SHA-256 of B in lower-case hex, and B one JSON value with no
// whitespace around it that decodes into the body, so encoding/json reads
// exactly N, H and B from it, and verifyEnvelope re-renders exactly the
// line (TestCanonicalEnvelopeAgrees, FuzzCanonicalEnvelope).

// splitEnvelope takes data (one line, its final newline optional) apart as
// the canonical envelope of field. ok is false if it is not in that form.
func splitEnvelope(data []byte, field string) (schema int, sum string, body []byte, ok bool) {
	data = bytes.TrimSuffix(data, []byte("\n"))
	rest, found := bytes.CutPrefix(data, []byte(`{"schema":`))
	if !found {
		return 0, "", nil, false
	}
	n := 0
	for n < len(rest) && n < 4 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n == 4 || rest[0] == '0' {
		return 0, "", nil, false // no number, too long, or not as strconv writes it
	}
	schema, err := strconv.Atoi(string(rest[:n]))
	if err != nil {
		return 0, "", nil, false
	}
	rest, found = bytes.CutPrefix(rest[n:], []byte(`,"sha256":"`))
	size := hex.EncodedLen(sha256.Size)
	if !found || len(rest) < size {
		return 0, "", nil, false
	}
	sum = string(rest[:size])
	rest, found = bytes.CutPrefix(rest[size:], []byte(`","`+field+`":`))
	if !found || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return 0, "", nil, false
	}
	body = rest[:len(rest)-1]
	if jsonSpace(body[0]) || jsonSpace(body[len(body)-1]) || bytes.Equal(body, []byte("null")) {
		return 0, "", nil, false
	}
	return schema, sum, body, true
}

// jsonSpace is JSON's insignificant whitespace.
func jsonSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// sumMatches reports whether sum is the lower-case hex SHA-256 of body.
func sumMatches(body []byte, sum string) bool {
	got := sha256.Sum256(body)
	return hex.EncodeToString(got[:]) == sum
}

// decodeCanonical is Decode of a canonical snapshot line; ok is false for
// anything else, which Decode's general path then judges.
func decodeCanonical(data []byte) (*Record, bool) {
	schema, sum, body, ok := splitEnvelope(data, "record")
	if !ok || schema < 1 || schema > SchemaVersion || !sumMatches(body, sum) {
		return nil, false
	}
	rec := new(Record)
	if err := json.Unmarshal(body, rec); err != nil || rec.Schema != schema || validateRecord(rec) != nil {
		return nil, false
	}
	return rec, true
}

// parseDeltaCanonical is parseDelta of a canonical delta line; ok is false
// for anything else, which parseDelta's general path then judges.
func parseDeltaCanonical(data []byte) (*deltaRecord, bool) {
	schema, sum, body, ok := splitEnvelope(data, "delta")
	if !ok || schema != deltaSchema || !sumMatches(body, sum) {
		return nil, false
	}
	d := new(deltaRecord)
	if err := json.Unmarshal(body, d); err != nil {
		return nil, false
	}
	return d, true
}
