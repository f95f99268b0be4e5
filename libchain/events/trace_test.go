package events

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/catena-cni/catena/libchain/tracectx"
)

func TestTraceOf(t *testing.T) {
	const trace, span, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "1111111111111111"
	tests := []struct {
		name      string
		op        Op
		want      string
		continued bool
	}{
		{"continued", Op{TraceID: trace, SpanID: span, ParentSpanID: parent}, trace, true},
		{"inside a root operation", Op{SpanID: span, ParentSpanID: parent}, tracectx.RootTraceID(parent), false},
		{"a root", Op{SpanID: span}, tracectx.RootTraceID(span), false},
		{"no span", Op{}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, continued := tt.op.TraceOf()
			assert.Equal(t, tt.want, id)
			assert.Equal(t, tt.continued, continued)
		})
	}
}
