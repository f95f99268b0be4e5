package tracectx

import (
	"errors"
	"fmt"
	"strings"
)

// The environment variables that carry a trace context into a process
// (OpenTelemetry's OTEP 0258, as libcni sets them for every plugin it
// runs): the W3C traceparent, tracestate and baggage.
const (
	EnvTraceparent = "TRACEPARENT"
	EnvTracestate  = "TRACESTATE"
	EnvBaggage     = "BAGGAGE"
)

// Context is the trace context a process continues: its caller's
// traceparent, with the tracestate and baggage that came with it, each
// checked (ParseTraceparent, ParseTracestate, ParseBaggage) and bounded.
// The zero Context is no trace.
type Context struct {
	Parent Parent
	// State is the tracestate, "" for none.
	State string
	// Baggage is the baggage, "" for none.
	Baggage string
}

// Valid reports whether c is a trace: its Parent is valid.
func (c Context) Valid() bool { return c.Parent.Valid() }

// WithSpan returns c with span as its parent-id: the context a callee of
// that span continues, in the same trace, with the same flags, state and
// baggage.
func (c Context) WithSpan(span SpanID) Context {
	c.Parent.SpanID = span
	return c
}

// IsCarrier reports whether kv, an environment entry "NAME=value", is one
// of the three carriers.
func IsCarrier(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	return name == EnvTraceparent || name == EnvTracestate || name == EnvBaggage
}

// AppendEnv appends c's carriers to env: TRACEPARENT (as version 00),
// then TRACESTATE and BAGGAGE when c has them; nothing when c is not
// valid. env is not written to: append to a clipped slice to keep the
// caller's.
func (c Context) AppendEnv(env []string) []string {
	if !c.Valid() {
		return env
	}
	b := make([]byte, 0, len(EnvTraceparent)+1+traceparentLen)
	b = append(b, EnvTraceparent+"="...)
	env = append(env, string(c.Parent.AppendText(b)))
	if c.State != "" {
		env = append(env, EnvTracestate+"="+c.State)
	}
	if c.Baggage != "" {
		env = append(env, EnvBaggage+"="+c.Baggage)
	}
	return env
}

// FromEnv reads the trace context that the carriers lookup finds hold
// (os.LookupEnv: the process's environment). An empty or missing
// TRACEPARENT is no trace, and so is a malformed one: then TRACESTATE and
// BAGGAGE are not carried either. A malformed or oversized TRACESTATE or
// BAGGAGE is dropped alone. The error says what was dropped and why, one
// error per variable, joined; it names no value but a traceparent's
// (baggage may hold what its sender would not log). The Context is what
// was valid, whatever the error.
func FromEnv(lookup func(string) (string, bool)) (Context, error) {
	var c Context
	raw, _ := lookup(EnvTraceparent)
	if raw == "" {
		return c, nil
	}
	p, err := ParseTraceparent(raw)
	if err != nil {
		return c, fmt.Errorf("%s %q ignored, and with it any %s and %s: %w", EnvTraceparent, short(raw), EnvTracestate, EnvBaggage, err)
	}
	c.Parent = p
	var errs []error
	if s, _ := lookup(EnvTracestate); s != "" {
		if err := ParseTracestate(s); err != nil {
			errs = append(errs, fmt.Errorf("%s ignored: %w", EnvTracestate, err))
		} else {
			c.State = s
		}
	}
	if b, _ := lookup(EnvBaggage); b != "" {
		if err := ParseBaggage(b); err != nil {
			errs = append(errs, fmt.Errorf("%s ignored: %w", EnvBaggage, err))
		} else {
			c.Baggage = b
		}
	}
	return c, errors.Join(errs...)
}
