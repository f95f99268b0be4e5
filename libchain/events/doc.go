// Package events is Catena's event journal: one line per operation that
// the engine (package libchain) ran, for catenactl stats and metrics and
// for the agent's metrics and Kubernetes events. It is observability, not
// state: it is never fsynced, and a failure to write it is logged and
// never fails an operation. It sits below the engine, which fills an Op
// per operation and hands it to the hook OnOp returns.
//
// On disk, under a cache dir:
//
//	<cacheDir>/events/events.jsonl    the journal
//	<cacheDir>/events/events.jsonl.1  the journal before its last rotation
//
// Each line is one Op as JSON, ended by a newline, of at most MaxLine
// (64 KiB) bytes before it: Append writes it with a single O_APPEND
// write, so the lines of concurrent Catena processes never interleave,
// and cuts the texts of an Op that would be longer (its Truncated is then
// set). Once events.jsonl reaches 4 MiB, the writer that filled it renames
// it to events.jsonl.1 (replacing the previous one) under an exclusive
// flock, so at most about 8 MiB is kept; a writer still holding the old
// file appends to .1, and nothing is lost.
//
// Trust: the journal is reached like the records (fileutil.TrustedFs): no
// symlink is followed, in events/ or as a file, and events/ and both
// files must be Catena's own and writable by no other user; Append and
// the readers refuse anything else with an error naming it, and a reader
// refuses what is not a regular file (a FIFO never blocks the open).
// Whatever a line holds, reading it is safe: one line reader (lines.go)
// serves both the whole-file Read and the incremental Tail. It reads at
// most MaxLine bytes of a line whatever its length, ignores empty lines,
// and skips and counts (Skipped) any line that is not an operation:
// longer than MaxLine, not JSON, or JSON without a verb. A last line
// without a newline is a torn append to Read (skipped) and a line still
// being written to Tail (left for its next Poll).
//
// Files:
//
//	doc.go     this description
//	op.go      Op, OpCall, OpPod, OpRelease: what one line holds
//	trace.go   Op.TraceOf: the trace an operation is exported in
//	writer.go  Path, MaxLine, Writer.Append, OnOp and the rotation
//	encode.go  encode: an Op as one line of at most MaxLine bytes
//	lines.go   the line reader: scanLines, decode, Skipped
//	read.go    Read: the whole journal, and openFile, the trusted open
//	tail.go    Tail: what was appended since the last Poll, across rotations
//	process.go SelfProcess, ProcessOf: an operation's process figures from /proc
package events
