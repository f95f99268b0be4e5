// Package failpoint holds Catena's crash points: Hit marks one, in the
// engine (around every durable write, each teardown step, a quarantine)
// and in the executor (a delegate's ADD or DEL running). A binary built
// with `-tags failpoint` kills itself with SIGKILL at the point and pass
// its environment names (on.go); any other build compiles Hit away
// (off.go).
//
// Files:
//
//	doc.go  this comment
//	on.go   Hit with the failpoint tag: the kill at the named point and pass
//	off.go  Hit without it: nothing
package failpoint
