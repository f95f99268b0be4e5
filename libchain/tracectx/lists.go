package tracectx

import (
	"fmt"
	"strings"
)

// The bounds of what Catena carries: a value over its bound is dropped
// whole, never cut.
const (
	// MaxTracestate is the longest tracestate carried, in bytes: the
	// 512 characters Trace Context asks every vendor to propagate at
	// least (section 3.3.1.5).
	MaxTracestate = 512
	// MaxTracestateMembers is the most list-members a tracestate has
	// (Trace Context, section 3.3.1.1).
	MaxTracestateMembers = 32
	// MaxBaggage is the longest baggage carried, in bytes: the 8192
	// bytes W3C Baggage asks every platform to propagate (section 3.3),
	// and OpenTelemetry's limit.
	MaxBaggage = 8192
	// MaxBaggageMembers is the most list-members of a baggage carried:
	// the 64 W3C Baggage asks every platform to propagate, and
	// OpenTelemetry's limit.
	MaxBaggageMembers = 64
)

// ParseTracestate checks a W3C tracestate (Trace Context, section 3.3):
// at most MaxTracestateMembers list-members key=value, separated by ","
// and optional spaces or tabs, empty members allowed; each key a simple
// key (a lowercase letter, then up to 255 of a-z 0-9 _ - * /) or a
// multi-tenant one (tenant@system: a tenant of a letter or digit and up
// to 240 more, a system of a letter and up to 13 more); each value 1 to
// 256 printable ASCII characters but "," and "=", not ending in a space;
// no key twice. It also refuses one longer than MaxTracestate. Every
// error wraps ErrMalformed.
func ParseTracestate(s string) error {
	if len(s) > MaxTracestate {
		return fmt.Errorf("%w: %d bytes, over the %d carried", ErrMalformed, len(s), MaxTracestate)
	}
	var keys [MaxTracestateMembers]string
	n := 0
	for member := range strings.SplitSeq(s, ",") {
		member = trimOWS(member)
		if member == "" {
			continue
		}
		if n == MaxTracestateMembers {
			return fmt.Errorf("%w: more than %d list-members", ErrMalformed, MaxTracestateMembers)
		}
		key, value, ok := strings.Cut(member, "=")
		if !ok {
			return fmt.Errorf("%w: list-member %d has no \"=\"", ErrMalformed, n)
		}
		if !tracestateKey(key) {
			return fmt.Errorf("%w: list-member %d: its key is not a tracestate key", ErrMalformed, n)
		}
		if !tracestateValue(value) {
			return fmt.Errorf("%w: list-member %d: its value is not a tracestate value", ErrMalformed, n)
		}
		for _, k := range keys[:n] {
			if k == key {
				return fmt.Errorf("%w: list-member %d: its key is there twice", ErrMalformed, n)
			}
		}
		keys[n] = key
		n++
	}
	return nil
}

// tracestateKey reports whether k is a simple or multi-tenant key.
func tracestateKey(k string) bool {
	tenant, system, multi := strings.Cut(k, "@")
	if !multi {
		return len(k) >= 1 && len(k) <= 256 && isLower(k[0]) && keyChars(k[1:])
	}
	return len(tenant) >= 1 && len(tenant) <= 241 && (isLower(tenant[0]) || isDigit(tenant[0])) && keyChars(tenant[1:]) &&
		len(system) >= 1 && len(system) <= 14 && isLower(system[0]) && keyChars(system[1:])
}

func keyChars(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !isLower(c) && !isDigit(c) && c != '_' && c != '-' && c != '*' && c != '/' {
			return false
		}
	}
	return true
}

// tracestateValue: 0*255 chr, then one nblk-chr (0x21-0x7e but "," and
// "="); chr adds the space.
func tracestateValue(v string) bool {
	if len(v) == 0 || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := range len(v) {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

// ParseBaggage checks a W3C baggage (W3C Baggage, section 3.3.1): at most
// MaxBaggageMembers list-members key=value, separated by "," and
// optional spaces or tabs, each followed by any ";"-separated properties
// (key or key=value); keys are HTTP tokens, values any characters but
// controls, spaces, '"', ",", ";" and "\" (percent-encoded text
// included). It also refuses one longer than MaxBaggage. Every error
// wraps ErrMalformed.
func ParseBaggage(s string) error {
	if len(s) > MaxBaggage {
		return fmt.Errorf("%w: %d bytes, over the %d carried", ErrMalformed, len(s), MaxBaggage)
	}
	n := 0
	for member := range strings.SplitSeq(s, ",") {
		if n == MaxBaggageMembers {
			return fmt.Errorf("%w: more than %d list-members", ErrMalformed, MaxBaggageMembers)
		}
		first := true
		for part := range strings.SplitSeq(member, ";") {
			key, value, hasValue := strings.Cut(part, "=")
			key, value = trimOWS(key), trimOWS(value)
			switch {
			case !token(key):
				return fmt.Errorf("%w: list-member %d: a key is not a token", ErrMalformed, n)
			case first && !hasValue:
				return fmt.Errorf("%w: list-member %d has no \"=\"", ErrMalformed, n)
			case !baggageValue(value):
				return fmt.Errorf("%w: list-member %d: a value is not a baggage value", ErrMalformed, n)
			}
			first = false
		}
		n++
	}
	return nil
}

// token reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !isLower(c) && !isUpper(c) && !isDigit(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// baggageValue: *baggage-octet, 0x21-0x7e but '"', ",", ";" and "\".
func baggageValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; c < 0x21 || c > 0x7e || c == '"' || c == ',' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}

// trimOWS trims the spaces and tabs around s.
func trimOWS(s string) string { return strings.Trim(s, " \t") }

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// short is s cut to 64 bytes, for an error message (only a
// traceparent's text is ever quoted in one).
func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
