package events

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's starttime: 100
// on every Linux ABI Catena builds for.
const clockTicks = 100

// SelfProcess is the OpProcess of the calling process, for an operation
// that began at opStart: read from /proc/self, and CLOCK_BOOTTIME, the
// clock of the process's start time.
func SelfProcess(opStart time.Time) (*OpProcess, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return nil, fmt.Errorf("process: boot time: %w", err)
	}
	return ProcessOf(os.DirFS("/proc/self"), time.Duration(ts.Nano()), time.Since(opStart))
}

// ProcessOf reads a process's OpProcess from proc, its /proc/<pid>
// directory: its start time from stat, the CPU and run delay of each of
// its threads from task/*/schedstat. sinceBoot is the time since boot
// now, sinceOp the time since the operation began.
func ProcessOf(proc fs.FS, sinceBoot, sinceOp time.Duration) (*OpProcess, error) {
	stat, err := fs.ReadFile(proc, "stat")
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	started, err := startTime(stat)
	if err != nil {
		return nil, err
	}
	p := &OpProcess{Startup: max(0, sinceBoot-started-sinceOp)}
	// Each thread's schedstat by name: a glob would list every thread's
	// directory, ten times the cost.
	tasks, err := fs.ReadDir(proc, "task")
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("process: no task")
	}
	for _, task := range tasks {
		name := path.Join("task", task.Name(), "schedstat")
		b, err := fs.ReadFile(proc, name)
		if err != nil {
			return nil, fmt.Errorf("process: %w", err)
		}
		cpu, delay, err := schedStat(b)
		if err != nil {
			return nil, fmt.Errorf("process: %s: %w", path.Dir(name), err)
		}
		p.CPU += cpu
		p.RunDelay += delay
	}
	return p, nil
}

// startTime is the starttime field (the 22nd) of a /proc/<pid>/stat,
// which counts the command (the 2nd, in parentheses) as one field
// whatever it holds.
func startTime(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("process: stat: no command")
	}
	f := bytes.Fields(stat[i+1:])
	const field = 22 - 3 // fields after the command start at the 3rd
	if len(f) <= field {
		return 0, fmt.Errorf("process: stat: %d fields after the command", len(f))
	}
	ticks, err := strconv.ParseUint(string(f[field]), 10, 63)
	if err != nil {
		return 0, fmt.Errorf("process: stat: starttime: %w", err)
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// schedStat parses a schedstat: the time on a CPU and the time waiting
// for one, in ns, then the number of time slices.
func schedStat(b []byte) (cpu, delay time.Duration, err error) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("schedstat: %q", b)
	}
	c, err1 := strconv.ParseUint(string(f[0]), 10, 63)
	d, err2 := strconv.ParseUint(string(f[1]), 10, 63)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("schedstat: %q", b)
	}
	return time.Duration(c), time.Duration(d), nil
}
