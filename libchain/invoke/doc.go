// Package invoke runs Catena's delegates as processes, as libcni keeps
// pkg/invoke beside libcni: it finds a delegate in CNI_PATH, spawns it in
// its own process group, feeds it its request, bounds what it prints, and
// kills and reaps it at its deadline. Each delegate gets the trace
// context of its call (Call.Trace), never the one Catena inherited. The
// engine (libchain) sees it only through its Executor interface, which
// Exec implements: libchain imports this package for the types of a call
// (Call, RuntimeArgs, which it aliases) and for the stdin gate's context,
// never the other way round.
//
// The files:
//
//	doc.go       this comment
//	exec.go      Exec, the engine's Executor: Call, RuntimeArgs, finding a delegate in CNI_PATH, each call's environment with its own trace context, VERSION
//	procexec.go  ProcExec, the CNI invoke package's Exec over spawn: timeouts, output bounds and grace (WithOutputGrace), the delegate's error
//	exit.go      ExitError: a failed delegate's CNI error with its exit status
//	spawn.go     one delegate's process without os/exec: vfork with a pidfd, ppoll loop, kill, reaping
//	gate.go      the stdin gate: a delegate gets its request only once its caller opened the gate
package invoke
