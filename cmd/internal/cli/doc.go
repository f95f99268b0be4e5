// Package cli holds what catenactl and catena-agent share on their command
// line: exit codes and usage errors, --version, and the escaping that shows
// text from a record, an event or a delegate on a terminal without letting
// it act.
//
// Files:
//
//	doc.go      this comment
//	escape.go   Printable: text from a record, an event or a delegate escaped for a terminal
//	run.go      Execute: a cobra command run to an exit code (0, 1, or 2 for a UsageError), its error escaped
//	version.go  SetVersion: --version, the binary's name with Catena's version and commit
package cli
