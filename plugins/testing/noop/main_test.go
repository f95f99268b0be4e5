package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name, verb, stdin string
		wantCode          int
		wantOut           string // a substring; "" means no output at all
	}{
		{name: "ADD answers in the request's version", verb: "ADD", stdin: `{"cniVersion":"1.0.0","name":"n","type":"noop"}`, wantOut: `"cniVersion":"1.0.0"`},
		{name: "ADD of 0.4.0 names the IP version", verb: "ADD", stdin: `{"cniVersion":"0.4.0","name":"n"}`, wantOut: `"version":"4"`},
		{name: "ADD without a version answers 1.1.0", verb: "ADD", stdin: `{"name":"n"}`, wantOut: `"cniVersion":"1.1.0"`},
		{name: "ADD takes the top level's version, not prevResult's", verb: "ADD",
			stdin: `{"cniVersion":"1.1.0","name":"n","prevResult":{"cniVersion":"0.4.0"}}`, wantOut: `"cniVersion":"1.1.0"`},
		{name: "VERSION", verb: "VERSION", stdin: `{"cniVersion":"1.1.0"}`, wantOut: `"supportedVersions"`},
		{name: "DEL prints nothing", verb: "DEL", stdin: `{"cniVersion":"1.1.0"}`},
		{name: "CHECK prints nothing", verb: "CHECK"},
		{name: "STATUS prints nothing", verb: "STATUS"},
		{name: "GC prints nothing", verb: "GC"},
		{name: "an unknown verb fails", verb: "FROB", wantCode: 1, wantOut: `"code":4`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			assert.Equal(t, tc.wantCode, run(tc.verb, strings.NewReader(tc.stdin), &out))
			if tc.wantOut == "" {
				assert.Empty(t, out.String())
				return
			}
			assert.Contains(t, out.String(), tc.wantOut)
			assert.True(t, json.Valid(out.Bytes()), "not JSON: %s", out.String())
		})
	}
}

func TestCNIVersion(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"cniVersion": "0.3.1"}`, "0.3.1"},
		{`{"cniVersion":1}`, ""},
		{`{"cniVersion":"unterminated`, ""},
		{`{}`, ""},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, cniVersion([]byte(tc.in)), tc.in)
	}
}
