package main

import (
	"time"

	"github.com/catena-cni/catena/tools/nodebench"
)

// nodeBusy reads how much CPU time the whole machine has spent not idle
// since boot, summed over its CPUs (nodebench.CPUTimes). A burst's
// difference of two readings is what the burst cost the node, whoever
// paid it (catena, its delegates, an executor, the runtime), plus
// whatever else ran then.
func nodeBusy() (time.Duration, error) {
	t, err := nodebench.ReadCPUTimes()
	return t.Busy, err
}
