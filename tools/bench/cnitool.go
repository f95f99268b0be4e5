package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// cmdTimeout bounds one cnitool or ip invocation.
const cmdTimeout = 2 * time.Minute

// call is one cnitool invocation.
type call struct {
	v     *variant
	verb  string // add, del
	netns string // path
	port  int    // host port of the one port mapping
	// cniPath overrides the bench's CNI_PATH (the RSS recorder's dir).
	cniPath string
	env     []string
}

// invoke runs `cnitool verb <network> <netns>` and returns how long it took.
func (b *bench) invoke(c call) (time.Duration, error) {
	s, err := b.invokeCPU(c)
	return s.wall, err
}

// sample is one timed call: its wall time, and the CPU time of the whole
// call, wait4's utime+stime of the process and of every descendant it
// reaped (cnitool's include catena's and the delegates').
type sample struct {
	wall, cpu time.Duration
}

// cpuOf is the utime+stime of an exited process and its reaped descendants.
func cpuOf(ps *os.ProcessState) time.Duration {
	return ps.UserTime() + ps.SystemTime()
}

// invokeCPU runs `cnitool verb <network> <netns>` and returns its sample.
//
// An interrupt of the bench does not kill a cnitool in flight: it runs in its
// own process group (so a terminal's ^C does not reach it either) and only a
// hang past cmdTimeout kills it. The bench stops between steps instead, and
// cleans up.
func (b *bench) invokeCPU(c call) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.cnitoolPath, c.verb, c.v.network, c.netns)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cniPath := b.opts.cniPath
	if c.cniPath != "" {
		cniPath = c.cniPath
	}
	cmd.Env = append(os.Environ(),
		"CNI_PATH="+cniPath,
		"NETCONFPATH="+c.v.netDir,
		fmt.Sprintf(`CAP_ARGS={"portMappings":[{"hostPort":%d,"containerPort":80,"protocol":"tcp"}]}`, c.port),
	)
	cmd.Env = append(cmd.Env, c.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("cnitool %s %s %s: %w: %s", c.verb, c.v.network, c.netns, err, strings.TrimSpace(out.String()))
	}
	return sample{wall: elapsed, cpu: cpuOf(cmd.ProcessState)}, nil
}

func ipCmd(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
