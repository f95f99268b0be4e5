// Package libcnitest has the test helpers that the tests of
// libchain/libcnientry and node/adopt share: real libcni ADDs and DELs over
// a recording executor, which write the runtime's genuine cache entries
// (libcni.go); a fake executor for Catena's engine, and entries changed one
// field at a time, replaced by what is not a regular file, or planted with
// another owner (fixtures.go).
//
// Files:
//
//	doc.go       this comment
//	libcni.go    RecordingExec: real libcni ADDs and DELs that write genuine cache entries
//	fixtures.go  FakeExecutor, the entry fixtures and World, a results dir and a cache dir
package libcnitest
