package main

import (
	"runtime"
	"runtime/debug"
)

// memoryLimit is the heap size past which the garbage collector runs.
const memoryLimit = 64 << 20

// tuneRuntime sizes the Go runtime for a process that lives for one CNI
// call and spends it waiting on its delegates: one P (a second one only
// adds threads that spin and are torn down at exit), and no garbage
// collection below memoryLimit (a call allocates a few MB at most, all
// freed at exit; past the limit the collector runs as usual, so a large
// GC or a huge result cannot exhaust memory). Measured per ADD of a
// 3-delegate chain: see docs/performance.md.
func tuneRuntime() {
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(memoryLimit)
}
