package cli

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s with everything a terminal could act on escaped, so
// that text from a record, an event or a delegate is shown, never obeyed:
// control characters (C0 including tab and newline, DEL, C1) as \t, \n, \r,
// \xNN or \u00NN; bidirectional and line-separator format characters, which
// can reorder or hide what is shown, as \uNNNN; and each byte of invalid
// UTF-8 as \xNN. Text output uses it for every such string; JSON output
// needs nothing more than encoding/json's escaping (see EscapeJSON).
func Printable(s string) string {
	return escapeText(s, false)
}

// PrintableLines is Printable keeping newlines and tabs, for messages of
// several lines (errors on stderr).
func PrintableLines(s string) string {
	return escapeText(s, true)
}

func escapeText(s string, keepLines bool) string {
	clean := func(r rune) bool {
		return r != utf8.RuneError && !mustEscape(r) || keepLines && (r == '\n' || r == '\t')
	}
	if strings.IndexFunc(s, func(r rune) bool { return !clean(r) }) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case clean(r) || r == utf8.RuneError: // a literal U+FFFD
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// mustEscape reports whether r must not reach a terminal raw: a control
// character, or a format character that reorders text (bidi embeddings,
// overrides and isolates, directional marks) or breaks lines.
func mustEscape(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u200e', r == '\u200f', r == '\u061c', r == '\u2028', r == '\u2029':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// EscapeJSON escapes, in JSON that encoding/json wrote, what Printable
// escapes and encoding/json leaves raw: DEL, C1 and bidi characters as
// \uNNNN, and a byte of invalid UTF-8 as \ufffd. Outside its strings
// such JSON is ASCII without control characters other than the newlines
// of indentation, so every rune replaced is inside a string, where the
// escape means the same character.
func EscapeJSON(data []byte) []byte {
	dirty := func(r rune) bool { return r == utf8.RuneError || (r != '\n' && mustEscape(r)) }
	if bytes.IndexFunc(data, dirty) < 0 {
		return data
	}
	out := make([]byte, 0, len(data)+64)
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out = append(out, `\ufffd`...)
		case dirty(r) && r != utf8.RuneError:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, data[i:i+size]...)
		}
		i += size
	}
	return out
}
