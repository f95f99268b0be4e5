// Package retriertest keeps the tests that run the real catena binary from
// leaving a detached retrier (catena --retry-pending) behind: a catena call
// that leaves a teardown pending starts one, in a session of its own, and
// it outlives the call by seconds, writing to the cache dir while the test
// removes it.
//
// Files:
//
//	doc.go          this comment
//	retriertest.go  PIDs, Reap, Kill and Hold: a cache dir's detached retriers found, waited for, killed, or kept from starting
package retriertest
