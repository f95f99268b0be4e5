package tracectx

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// members is n list-members k<i>=v, joined by ",".
func members(n int) string {
	m := make([]string, n)
	for i := range m {
		m[i] = fmt.Sprintf("k%d=v", i)
	}
	return strings.Join(m, ",")
}

// TestParseTracestate: what Trace Context's grammar allows is accepted,
// and everything it refuses, and a tracestate over the bound carried, is
// an error wrapping ErrMalformed.
func TestParseTracestate(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"empty", "", true},
		{"one member", "congo=t61rcWkgMzE", true},
		{"the spec's example", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true},
		{"spaces and tabs around members", " rojo=1 ,\tcongo=2\t", true},
		{"empty members", "rojo=1,,congo=2,", true},
		{"multi-tenant key", "fw529a3039@dt=abc", true},
		{"key of every key character", "a0_-*/=x", true},
		{"value with inner spaces and punctuation", "k=a b!~", true},
		{"32 members", members(32), true},
		{"at the byte bound", "k=" + strings.Repeat("v", 253) + ",l=" + strings.Repeat("v", 254), true},

		{"33 members", members(33), false},
		{"over the byte bound", "k=" + strings.Repeat("v", 254) + ",l=" + strings.Repeat("v", 254), false},
		{"no equals", "rojo", false},
		{"empty key", "=v", false},
		{"uppercase key", "Rojo=1", false},
		{"key starting with a digit", "1rojo=1", false},
		{"key too long", strings.Repeat("k", 257) + "=v", false},
		{"tenant too long", strings.Repeat("t", 242) + "@s=v", false},
		{"system too long", "t@" + strings.Repeat("s", 15) + "=v", false},
		{"system starting with a digit", "t@1s=v", false},
		{"empty value", "k=", false},
		{"value ending in a space inside", "k=v \x00", false},
		{"value with an equals", "k=a=b", false},
		{"value too long", "k=" + strings.Repeat("v", 257), false},
		{"value with a control", "k=a\x01b", false},
		{"value with non-ASCII", "k=caf\u00e9", false},
		{"a key twice", "k=1,k=2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ParseTracestate(tt.in)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
}

// TestParseBaggage: what W3C Baggage's grammar allows is accepted, and
// everything it refuses, and a baggage over the bounds carried, is an
// error wrapping ErrMalformed.
func TestParseBaggage(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"one member", "userId=alice", true},
		{"the spec's example", "key1=value1;property1;property2, key2 = value2, key3=value3; propertyKey=propertyValue", true},
		{"percent-encoded value", "serverNode=DF%2028,isProduction=false", true},
		{"empty value", "k=", true},
		{"64 members", members(64), true},
		{"at the byte bound", "k=" + strings.Repeat("v", MaxBaggage-2), true},

		{"65 members", members(65), false},
		{"over the byte bound", "k=" + strings.Repeat("v", MaxBaggage-1), false},
		{"empty", "", false},
		{"empty member", "a=1,,b=2", false},
		{"no equals", "userId", false},
		{"empty key", "=v", false},
		{"key not a token", "user id=1", false},
		{"value with a space inside", "k=a b", false},
		{"value with a quote", `k="v"`, false},
		{"value with a backslash", `k=a\b`, false},
		{"value with a control", "k=a\x01", false},
		{"value with non-ASCII", "k=caf\u00e9", false},
		{"property key not a token", "k=v;p q", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ParseBaggage(tt.in)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
}
