package nodebench

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

// CPUTimes is the CPU time the whole machine has spent since boot,
// summed over its CPUs, from the "cpu" line of /proc/stat: busy (user,
// nice, system, irq, softirq and steal; guest time is already inside
// user and nice) and idle (idle and iowait). The difference of two
// readings is what ran between them, whoever ran it.
type CPUTimes struct{ Busy, Idle time.Duration }

// ReadCPUTimes reads the machine's CPUTimes from /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	defer func() { _ = f.Close() }()
	return parseCPUTimes(f)
}

// parseCPUTimes parses the first line of /proc/stat, the cpu total.
func parseCPUTimes(r io.Reader) (CPUTimes, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		return CPUTimes{}, fmt.Errorf("/proc/stat: empty: %w", sc.Err())
	}
	f := strings.Fields(sc.Text())
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("/proc/stat: first line %q is not the cpu total", sc.Text())
	}
	sum := func(fields ...int) (time.Duration, error) {
		var ticks uint64
		for _, i := range fields {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat: field %d of %q: %w", i, sc.Text(), err)
			}
			ticks += v
		}
		return time.Duration(ticks) * time.Second / userHZ, nil
	}
	busy, err := sum(1, 2, 3, 6, 7, 8) // user nice system [idle iowait] irq softirq steal
	if err != nil {
		return CPUTimes{}, err
	}
	idle, err := sum(4, 5)
	if err != nil {
		return CPUTimes{}, err
	}
	return CPUTimes{Busy: busy, Idle: idle}, nil
}

// BusyShare is the share of the CPU time between c and a later reading
// that was busy; 0 if no time passed.
func (c CPUTimes) BusyShare(later CPUTimes) float64 {
	busy, idle := later.Busy-c.Busy, later.Idle-c.Idle
	if busy < 0 || idle < 0 || busy+idle == 0 {
		return 0
	}
	return float64(busy) / float64(busy+idle)
}
