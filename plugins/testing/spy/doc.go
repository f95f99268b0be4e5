// Command spy is a test-only chained CNI plugin that records what it is
// handed. Placed after the primary in a chain, it gets the primary's
// result as its prevResult: on ADD it returns that prevResult, converted
// to its cniVersion, as any chained plugin does (an empty result of its
// cniVersion when there is none); on ADD, CHECK and DEL it appends one
// line to <logDir>/spy.log:
//
//	<monotonic ns> <wall time, RFC 3339, UTC> <VERB> <containerID> <ifname> <IPs>
//
// the monotonic time from CLOCK_MONOTONIC, which every process of the host
// shares, a container's too; the IPs those of the prevResult, without
// their prefix length, comma-separated, "-" when there are none (an empty
// containerID or ifname is "-" too). Each line is one write(2) on an
// O_APPEND descriptor, so that concurrent calls never interleave within a
// line. A call whose line cannot be written fails, so that every call that
// succeeds is in the log. STATUS and GC succeed and log nothing. Nothing
// but the result or the CNI error is written to stdout.
//
// The chaos soak puts it after flannel and checks from its log that no DEL
// is handed an address another attachment holds at that moment.
//
// With traceLog set, each of those calls also appends one JSON line to
// <logDir>/trace.log: its verb, containerID and the TRACEPARENT,
// TRACESTATE and BAGGAGE entries of its environment as exec handed it
// (TraceCall), so that a test sees the trace context a delegate got.
//
// Netconf fields:
//
//	logDir    string  required: the directory of spy.log (made if missing)
//	traceLog  bool    also log each call's trace context to trace.log
//
// Files:
//
//	doc.go       this comment
//	main.go      main: the CNI verbs through skel
//	spy.go       the netconf, the verbs and the log line
//	tracelog.go  the trace log: each call's trace context carriers
package main
