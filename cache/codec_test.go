package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCodecRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  *Record
	}{
		{"full", sampleRecord(testKey("abc123"))},
		{"minimal", &Record{Key: testKey("m"), Phase: PhaseAdding}},
		{"needs-teardown", func() *Record {
			r := sampleRecord(testKey("nt"))
			r.Phase = PhaseNeedsTeardown
			r.Steps[1].State = StepDelFailed
			r.Steps[1].DelAttempts = 3
			r.Steps[1].DelError = "plugin said <no> & \"quoted\""
			r.TeardownAttempts = 2
			r.LastError = "unicode ✓ é"
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rec.Schema = 0
			data := mustEncode(t, tt.rec)
			assert.Equal(t, SchemaVersion, tt.rec.Schema, "Encode sets the schema")
			assert.True(t, bytes.HasPrefix(data, []byte(`{"schema":1,"sha256":"`)), "%s", data)
			got, err := Decode(data)
			require.NoError(t, err)
			assert.Equal(t, tt.rec, got)
			again := mustEncode(t, got)
			assert.Equal(t, data, again, "encoding is deterministic")
		})
	}
}

func TestEncodeRefusesWhatDecodeWould(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Record)
	}{
		{"invalid container ID", func(r *Record) { r.Key.ContainerID = "../x" }},
		{"invalid ifname", func(r *Record) { r.Key.IfName = "a/b" }},
		{"invalid network", func(r *Record) { r.Key.Network = ".." }},
		{"missing phase", func(r *Record) { r.Phase = "" }},
		{"unknown phase", func(r *Record) { r.Phase = "bogus" }},
		{"missing step state", func(r *Record) { r.Steps[0].State = "" }},
		{"unknown step state", func(r *Record) { r.Steps[2].State = "bogus" }},
		{"invalid raw config", func(r *Record) { r.Steps[0].Config = json.RawMessage("{") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := sampleRecord(testKey("x"))
			tt.mod(rec)
			_, err := Encode(rec)
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrCorrupt)
		})
	}
	_, err := Encode(nil)
	assert.Error(t, err)
}

func sumOf(record string) string {
	sum := sha256.Sum256([]byte(record))
	return hex.EncodeToString(sum[:])
}

// envelopeOf wraps arbitrary record bytes in a correctly checksummed envelope.
func envelopeOf(schema string, record string) []byte {
	return []byte(`{"schema":` + schema + `,"sha256":"` + sumOf(record) + `","record":` + record + `}`)
}

func TestDecodeRejects(t *testing.T) {
	valid := mustEncode(t, sampleRecord(testKey("abc")))
	good := `{"schema":1,"key":{"network":"n","containerID":"c","ifName":"eth0"},"phase":"adding","steps":[]}`
	tests := []struct {
		name   string
		data   []byte
		future bool
	}{
		{"nil", nil, false},
		{"zero length", []byte{}, false},
		{"whitespace", []byte(" \n\t"), false},
		{"garbage", []byte("\x00\xff\xfegarbage"), false},
		{"json null", []byte("null"), false},
		{"json array", []byte("[1,2]"), false},
		{"json string", []byte(`"x"`), false},
		{"empty object", []byte("{}"), false},
		{"trailing data", append(append([]byte{}, valid...), []byte("{}")...), false},
		{"two envelopes", append(append([]byte{}, valid...), valid...), false},
		{"uppercase checksum", []byte(`{"schema":1,"sha256":"` + strings.ToUpper(sumOf(good)) + `","record":` + good + `}`), false},
		{"uppercase key", []byte(`{"SCHEMA":1,"sha256":"` + sumOf(good) + `","record":` + good + `}`), false},
		{"reordered envelope", []byte(`{"sha256":"` + sumOf(good) + `","schema":1,"record":` + good + `}`), false},
		{"pretty envelope", bytes.Replace(envelopeOf("1", good), []byte(`,`), []byte(`, `), 1), false},
		{"no schema", []byte(`{"sha256":"00","record":{}}`), false},
		{"schema zero", envelopeOf("0", good), false},
		{"schema negative", envelopeOf("-1", good), false},
		{"schema float", envelopeOf("1.5", good), false},
		{"schema string", envelopeOf(`"1"`, good), false},
		{"no checksum", []byte(`{"schema":1,"record":` + good + `}`), false},
		{"short checksum", []byte(`{"schema":1,"sha256":"abcd","record":` + good + `}`), false},
		{"non-hex checksum", []byte(`{"schema":1,"sha256":"` + strings.Repeat("zz", 32) + `","record":` + good + `}`), false},
		{"wrong checksum", []byte(`{"schema":1,"sha256":"` + strings.Repeat("00", 32) + `","record":` + good + `}`), false},
		{"no record", []byte(`{"schema":1,"sha256":"` + strings.Repeat("00", 32) + `"}`), false},
		{"null record", envelopeOf("1", "null"), false},
		{"record not an object", envelopeOf("1", `[1]`), false},
		{"record schema differs", envelopeOf("1", strings.Replace(good, `"schema":1`, `"schema":0`, 1)), false},
		{"record missing key", envelopeOf("1", `{"schema":1,"phase":"adding"}`), false},
		{"record missing phase", envelopeOf("1", `{"schema":1,"key":{"network":"n","containerID":"c","ifName":"eth0"}}`), false},
		{"record unknown phase", envelopeOf("1", strings.Replace(good, "adding", "exploding", 1)), false},
		{"record bad step", envelopeOf("1", strings.Replace(good, `"steps":[]`, `"steps":[{"state":"weird"}]`, 1)), false},
		{"record escaping container ID", envelopeOf("1", strings.Replace(good, `"containerID":"c"`, `"containerID":"../x"`, 1)), false},
		{"record escaping ifname", envelopeOf("1", strings.Replace(good, `"ifName":"eth0"`, `"ifName":"a/b"`, 1)), false},
		{"record escaping network", envelopeOf("1", strings.Replace(good, `"network":"n"`, `"network":".."`, 1)), false},
		{"record bad time", envelopeOf("1", strings.Replace(good, `"steps":[]`, `"steps":[],"created":"yesterday"`, 1)), false},
		{"future schema", envelopeOf("3", strings.Replace(good, `"schema":1`, `"schema":3`, 1)), true},
		{"delta is not a snapshot", envelopeOf("2", strings.Replace(good, `"schema":1`, `"schema":2`, 1)), false},
		{"future schema any body", []byte(`{"schema":99,"sha256":"new-algo:xyz","record":"opaque"}`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Decode(tt.data)
			require.Error(t, err)
			assert.Nil(t, rec)
			assert.ErrorIs(t, err, ErrCorrupt)
			assert.Equal(t, tt.future, errors.Is(err, ErrFutureSchema), "%v", err)
			assert.Equal(t, strings.ToLower(err.Error()[:1]), err.Error()[:1], "lowercase: %v", err)
		})
	}
	// The hand-made envelope is accepted when nothing is wrong with it.
	_, err := Decode(envelopeOf("1", good))
	require.NoError(t, err)
}

func TestDecodeEveryTruncation(t *testing.T) {
	valid := mustEncode(t, sampleRecord(testKey("abc")))
	// Encode ends with "}\n": dropping only the newline leaves a valid file.
	body := bytes.TrimRight(valid, "\n")
	for n := 0; n < len(body); n++ {
		rec, err := Decode(body[:n])
		if !assert.ErrorIs(t, err, ErrCorrupt, "truncated to %d bytes", n) || !assert.Nil(t, rec) {
			return
		}
	}
	_, err := Decode(body)
	require.NoError(t, err)
}

func TestDecodeBitFlips(t *testing.T) {
	valid := mustEncode(t, sampleRecord(testKey("abc")))
	data := make([]byte, len(valid))
	for i := range valid {
		for bit := 0; bit < 8; bit++ {
			copy(data, valid)
			data[i] ^= 1 << bit
			rec, err := Decode(data)
			require.ErrorIs(t, err, ErrCorrupt, "flip of bit %d of byte %d (%q)", bit, i, valid[i])
			require.Nil(t, rec)
		}
	}
}

func TestDecodeNeverPanicsOnGarbage(t *testing.T) {
	valid := mustEncode(t, sampleRecord(testKey("abc")))
	inputs := [][]byte{
		bytes.Repeat([]byte("{"), 100000),
		bytes.Repeat([]byte("["), 100000),
		[]byte(`{"schema":1e400}`),
		[]byte(`{"schema":1,"sha256":null,"record":null}`),
		[]byte(`{"schema":1,"sha256":"` + strings.Repeat("0", 1<<16) + `","record":{}}`),
		bytes.ReplaceAll(valid, []byte(`"`), []byte(`'`)),
		bytes.ReplaceAll(valid, []byte(`:`), []byte(`;`)),
	}
	for i, in := range inputs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			assert.NotPanics(t, func() {
				_, err := Decode(in)
				assert.ErrorIs(t, err, ErrCorrupt)
			})
		})
	}
}
