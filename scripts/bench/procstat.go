package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture Go supports (the kernel scales to it whatever its HZ).
const userHZ = 100

// nodeBusy reads how much CPU time the whole machine has spent not idle
// since boot, summed over its CPUs: every process's, the kernel's and
// interrupts', from the first line of /proc/stat. A burst's difference of
// two readings is what the burst cost the node, whoever paid it (catena,
// its delegates, an executor, the runtime), plus whatever else ran then.
func nodeBusy() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	return parseBusy(f)
}

// parseBusy sums user, nice, system, irq, softirq and steal of the "cpu"
// line (guest time is already inside user and nice; idle and iowait are
// not busy).
func parseBusy(r io.Reader) (time.Duration, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		return 0, fmt.Errorf("/proc/stat: empty: %w", sc.Err())
	}
	f := strings.Fields(sc.Text())
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu total", sc.Text())
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system [idle iowait] irq softirq steal
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i, sc.Text(), err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
