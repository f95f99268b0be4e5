package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Catena's peak RSS is measured by a recorder that stands in for catena in
// a private CNI dir: this very binary, linked there as "catena". It starts
// the real catena under ptrace, asking only for PTRACE_EVENT_EXIT, and when
// catena is about to exit (its memory still mapped) reads VmHWM, the peak
// resident set of catena alone, from /proc/<pid>/status. wait4's ru_maxrss,
// also recorded, is not catena's alone: it is the largest of catena and the
// delegates it waited for. The recorder costs catena nothing but the exit
// stop; its own start-up is why it is used only for the RSS runs, never for
// the timed ones.
const (
	envRecorderReal = "CATENA_BENCH_REAL_CATENA" // the catena the recorder runs
	envRecorderOut  = "CATENA_BENCH_RSS_FILE"    // where it appends its samples
)

// rssSample is one recorded catena run.
type rssSample struct {
	verb    string
	hwmKB   int64 // catena alone
	maxrssK int64 // catena or its largest delegate
}

// maybeRecorder turns this process into the recorder when it was started as
// one, and never returns then.
func maybeRecorder() {
	if filepath.Base(os.Args[0]) != "catena" || os.Getenv(envRecorderReal) == "" {
		return
	}
	code, err := recordCatena(os.Getenv(envRecorderReal), os.Getenv(envRecorderOut))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench recorder: %v\n", err)
	}
	os.Exit(code)
}

// recordCatena runs the real catena with this process's argv, env and
// stdio, appends "<CNI_COMMAND> <VmHWM kB> <ru_maxrss kB>" to out, and
// returns catena's exit code.
func recordCatena(real, out string) (int, error) {
	runtime.LockOSThread() // every ptrace request must come from the tracer thread
	pid, err := syscall.ForkExec(real, os.Args, &syscall.ProcAttr{
		Env: os.Environ(), Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{Ptrace: true},
	})
	if err != nil {
		return 1, fmt.Errorf("start %s: %w", real, err)
	}
	hwm, ru, code, err := traceToExit(pid)
	if err != nil {
		return code, err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return code, err
	}
	defer func() { _ = f.Close() }()
	_, err = fmt.Fprintf(f, "%s %d %d\n", os.Getenv("CNI_COMMAND"), hwm, ru.Maxrss)
	return code, err
}

// traceToExit lets the traced pid run, forwarding its signals, reads its
// VmHWM at its exit stop, and reaps it.
func traceToExit(pid int) (hwm int64, ru syscall.Rusage, code int, err error) {
	var ws syscall.WaitStatus
	if _, err := wait4(pid, &ws, nil); err != nil {
		return 0, ru, 1, fmt.Errorf("catena did not stop after exec: %w", err)
	}
	if !ws.Stopped() {
		return 0, ru, 1, fmt.Errorf("catena did not stop after exec (status %v)", ws)
	}
	if err := syscall.PtraceSetOptions(pid, unix.PTRACE_O_TRACEEXIT|unix.PTRACE_O_EXITKILL); err != nil {
		return 0, ru, 1, fmt.Errorf("ptrace options: %w", err)
	}
	sig := 0
	for {
		if err := syscall.PtraceCont(pid, sig); err != nil {
			return hwm, ru, 1, fmt.Errorf("ptrace cont: %w", err)
		}
		if _, err := wait4(pid, &ws, &ru); err != nil {
			return hwm, ru, 1, err
		}
		sig = 0
		switch {
		case ws.Exited():
			return hwm, ru, ws.ExitStatus(), nil
		case ws.Signaled():
			return hwm, ru, 128 + int(ws.Signal()), nil
		case ws.Stopped() && ws.StopSignal() == syscall.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_EXIT:
			if hwm, err = vmHWM(pid); err != nil {
				return 0, ru, 1, err
			}
		case ws.Stopped() && ws.StopSignal() != syscall.SIGTRAP:
			sig = int(ws.StopSignal()) // a signal for catena: deliver it
		}
	}
}

func wait4(pid int, ws *syscall.WaitStatus, ru *syscall.Rusage) (int, error) {
	for {
		wpid, err := syscall.Wait4(pid, ws, 0, ru)
		if !errors.Is(err, syscall.EINTR) {
			return wpid, err
		}
	}
}

// vmHWM reads a live process's peak RSS in kB.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading /proc/%d/status: %w", pid, err)
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// recorder is the private CNI dir where "catena" is the recorder.
type recorder struct {
	dir, out string
}

func (b *bench) newRecorder() (*recorder, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("rss recorder: %w", err)
	}
	r := &recorder{dir: filepath.Join(b.tmp, "rss-cni"), out: filepath.Join(b.tmp, "rss.txt")}
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("rss recorder: %w", err)
	}
	links := map[string]string{"catena": self}
	for _, p := range []string{"bridge", "host-local", "portmap", "tuning"} {
		links[p] = filepath.Join(b.opts.cniPath, p)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(r.dir, name)); err != nil {
			return nil, fmt.Errorf("rss recorder: %w", err)
		}
	}
	return r, nil
}

// recordRSS runs opts.rssN ADD+DEL of v (a catena variant) under the
// recorder and returns their samples.
func (b *bench) recordRSS(ctx context.Context, r *recorder, v *variant) ([]rssSample, error) {
	if err := os.Remove(r.out); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	tweak := func(c *call) {
		c.cniPath = r.dir
		c.env = []string{envRecorderReal + "=" + filepath.Join(b.opts.cniPath, "catena"), envRecorderOut + "=" + r.out}
	}
	for i := range b.opts.rssN {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("interrupted: %w", err)
		}
		if _, _, err := b.addDel(v, fmt.Sprintf("rss%d", i), tweak); err != nil {
			return nil, fmt.Errorf("under the rss recorder: %w", err)
		}
	}
	return readRSS(r.out)
}

func readRSS(path string) ([]rssSample, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rss samples: %w", err)
	}
	var out []rssSample
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var s rssSample
		if _, err := fmt.Sscanf(line, "%s %d %d", &s.verb, &s.hwmKB, &s.maxrssK); err != nil {
			return nil, fmt.Errorf("rss sample %q: %w", line, err)
		}
		out = append(out, s)
	}
	return out, nil
}
