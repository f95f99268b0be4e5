// Command bench measures the ADD and DEL latency that catena adds to a real
// chain. It drives the same three delegates (bridge + host-local, portmap with
// one port mapping, tuning) through bin/cnitool twice:
//
//	catena: a conflist whose single entry is catena wrapping the delegates
//	plain:  a conflist listing the three plugins directly
//
// Every iteration runs catena ADD+DEL and plain ADD+DEL, alternating which
// goes first, each in a
// fresh netns created and deleted outside the timed region. It prints median
// and p95 per variant and verb, and the catena/plain ratio of the medians.
//
// Run as root from the repository root after `make plugins build`, or with
// `make bench`. Everything it writes lives in one temp dir, except what the
// plugins and cnitool themselves write (links, iptables rules, libcni's
// result cache), which the DELs and the final cleanup remove.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

const (
	// target is the largest acceptable catena/plain ratio of the medians.
	target = 1.10
	// cmdTimeout bounds one cnitool or ip invocation.
	cmdTimeout = 2 * time.Minute
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	n       int
	warmup  int
	binDir  string
	cniPath string
	strict  bool
}

func parseFlags() options {
	var o options
	flag.IntVar(&o.n, "n", 30, "measured iterations (each: catena ADD+DEL, plain ADD+DEL)")
	flag.IntVar(&o.warmup, "warmup", 2, "unmeasured warm-up iterations")
	flag.StringVar(&o.binDir, "bin", envOr("CATENA_BIN", "bin"), "directory holding cnitool")
	flag.StringVar(&o.cniPath, "cni-path", os.Getenv("CATENA_CNI_PATH"), "CNI_PATH holding catena and the reference plugins (default <bin>/cni)")
	flag.BoolVar(&o.strict, "strict", false, "exit non-zero when a ratio exceeds the target")
	flag.Parse()
	if o.cniPath == "" {
		o.cniPath = filepath.Join(o.binDir, "cni")
	}
	return o
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func run() error {
	o := parseFlags()
	if o.n < 1 {
		return errors.New("-n must be at least 1")
	}
	if os.Geteuid() != 0 {
		return errors.New("must run as root (creates netns, bridges and iptables rules)")
	}
	var err error
	if o.binDir, err = filepath.Abs(o.binDir); err != nil {
		return fmt.Errorf("resolve -bin: %w", err)
	}
	if o.cniPath, err = filepath.Abs(o.cniPath); err != nil {
		return fmt.Errorf("resolve -cni-path: %w", err)
	}
	cnitool := filepath.Join(o.binDir, "cnitool")
	need := []string{cnitool}
	for _, p := range []string{"catena", "bridge", "host-local", "portmap", "tuning"} {
		need = append(need, filepath.Join(o.cniPath, p))
	}
	for _, p := range need {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("missing %s (run 'make plugins build'): %w", p, err)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("iproute2 is required: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := newBench(o, cnitool)
	if err != nil {
		return err
	}
	runErr := b.run(ctx)
	cleanErr := b.cleanup()
	if runErr != nil {
		return errors.Join(runErr, cleanErr)
	}
	if cleanErr != nil {
		return cleanErr
	}
	over := b.report(os.Stdout)
	if o.strict && over {
		return fmt.Errorf("catena/plain ratio above target %.2f", target)
	}
	return nil
}

// variant is one way of running the chain.
type variant struct {
	name     string
	network  string
	bridge   string
	subnet   string
	hostPort int
	netDir   string
	addTimes []time.Duration
	delTimes []time.Duration
}

type bench struct {
	opts    options
	cnitool string
	tmp     string
	vars    []*variant
	// live netns (name -> variant whose ADD may have run in it), for cleanup.
	live map[string]*variant
}

func newBench(o options, cnitool string) (_ *bench, err error) {
	tmp, err := os.MkdirTemp("", "catena-bench-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	b := &bench{opts: o, cnitool: cnitool, tmp: tmp, live: map[string]*variant{}}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()

	pid := os.Getpid()
	octet := pid%250 + 1
	b.vars = []*variant{
		{name: "catena", network: fmt.Sprintf("catena-bench-a-%d", pid), bridge: trunc(fmt.Sprintf("cba%d", pid), 15),
			subnet: fmt.Sprintf("10.251.%d.0/24", octet), hostPort: 18181},
		{name: "plain", network: fmt.Sprintf("catena-bench-b-%d", pid), bridge: trunc(fmt.Sprintf("cbb%d", pid), 15),
			subnet: fmt.Sprintf("10.252.%d.0/24", octet), hostPort: 18182},
	}
	for _, v := range b.vars {
		v.netDir = filepath.Join(tmp, v.name, "net.d")
		if err := os.MkdirAll(v.netDir, 0o755); err != nil {
			return nil, fmt.Errorf("create netconf dir: %w", err)
		}
		conf := renderConflist(v, filepath.Join(tmp, v.name))
		if err := writeFile(filepath.Join(v.netDir, "10-"+v.network+".conflist"), conf); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// delegates renders the three plugins of the chain, without cniVersion/name
// (catena and libcni inject those).
func delegates(v *variant, dataDir string) string {
	return fmt.Sprintf(`{"type":"bridge","bridge":%q,"isGateway":true,`+
		`"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}},`+
		`{"type":"portmap","capabilities":{"portMappings":true}},`+
		`{"type":"tuning","sysctl":{"net.core.somaxconn":"512"}}`,
		v.bridge, dataDir, v.subnet)
}

// renderConflist returns the conflist of v; state (host-local's dataDir and
// catena's cacheDir) lives under dir.
func renderConflist(v *variant, dir string) []byte {
	dataDir := filepath.Join(dir, "host-local")
	var plugins string
	if v.name == "catena" {
		plugins = fmt.Sprintf(`{"type":"catena","cacheDir":%q,"lockTimeout":"30s","delegateTimeout":"60s",`+
			`"capabilities":{"portMappings":true},"delegates":[%s]}`,
			filepath.Join(dir, "cache"), delegates(v, dataDir))
	} else {
		plugins = delegates(v, dataDir)
	}
	return fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":%q,"plugins":[%s]}`+"\n", v.network, plugins)
}

func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

func (b *bench) run(ctx context.Context) error {
	total := b.opts.warmup + b.opts.n
	fmt.Fprintf(os.Stderr, "bench: %d warm-up + %d measured iterations, chain bridge+host-local, portmap, tuning\n",
		b.opts.warmup, b.opts.n)
	for i := range total {
		measured := i >= b.opts.warmup
		// Alternate which variant goes first, so that neither always runs
		// on a cache warmed (or a disk dirtied) by the other.
		order := b.vars
		if i%2 == 1 {
			order = []*variant{b.vars[1], b.vars[0]}
		}
		for _, v := range order {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("interrupted: %w", err)
			}
			add, del, err := b.once(v, i)
			if err != nil {
				return fmt.Errorf("%s iteration %d: %w", v.name, i, err)
			}
			if measured {
				v.addTimes = append(v.addTimes, add)
				v.delTimes = append(v.delTimes, del)
			}
		}
		if measured && (i-b.opts.warmup+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "bench: %d/%d\n", i-b.opts.warmup+1, b.opts.n)
		}
	}
	return nil
}

// once runs one ADD and one DEL of v in a fresh netns and returns their
// latencies. The netns is created and deleted outside the timed region.
func (b *bench) once(v *variant, i int) (add, del time.Duration, err error) {
	ns := fmt.Sprintf("cbench-%d-%s-%d", os.Getpid(), v.name, i)
	if err := ipCmd("netns", "add", ns); err != nil {
		return 0, 0, err
	}
	b.live[ns] = v
	nsPath := filepath.Join("/var/run/netns", ns)

	add, err = b.cnitoolRun(v, "add", nsPath)
	if err != nil {
		return 0, 0, fmt.Errorf("ADD: %w", err)
	}
	del, err = b.cnitoolRun(v, "del", nsPath)
	if err != nil {
		return 0, 0, fmt.Errorf("DEL: %w", err)
	}
	delete(b.live, ns)
	if err := ipCmd("netns", "del", ns); err != nil {
		return 0, 0, err
	}
	return add, del, nil
}

// cnitoolRun runs `cnitool verb <network> <netns>` and returns how long it took.
//
// An interrupt of the bench does not kill a cnitool in flight: it runs in its
// own process group (so a terminal's ^C does not reach it either) and only a
// hang past cmdTimeout kills it. The bench stops between steps instead, and
// cleans up.
func (b *bench) cnitoolRun(v *variant, verb, nsPath string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.cnitool, verb, v.network, nsPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(),
		"CNI_PATH="+b.opts.cniPath,
		"NETCONFPATH="+v.netDir,
		fmt.Sprintf(`CAP_ARGS={"portMappings":[{"hostPort":%d,"containerPort":80,"protocol":"tcp"}]}`, v.hostPort),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("cnitool %s %s: %w: %s", verb, v.network, err, strings.TrimSpace(out.String()))
	}
	return elapsed, nil
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

// cleanup DELs whatever may still be attached (so plugins remove their
// iptables rules and host-local frees its IPs), then removes netns, bridges
// and the temp dir.
func (b *bench) cleanup() error {
	var errs []error
	for ns, v := range b.live {
		if _, err := b.cnitoolRun(v, "del", filepath.Join("/var/run/netns", ns)); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		}
		if err := ipCmd("netns", "del", ns); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		}
		delete(b.live, ns)
	}
	for _, v := range b.vars {
		// The bridge exists only if an ADD ever ran; a missing one is fine.
		if err := exec.Command("ip", "link", "show", v.bridge).Run(); err == nil {
			if err := ipCmd("link", "del", v.bridge); err != nil {
				errs = append(errs, fmt.Errorf("cleanup: %w", err))
			}
		}
	}
	if err := os.RemoveAll(b.tmp); err != nil {
		errs = append(errs, fmt.Errorf("cleanup: remove %s: %w", b.tmp, err))
	}
	return errors.Join(errs...)
}

// report prints the table and returns whether a ratio exceeds the target.
func (b *bench) report(w io.Writer) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tverb\tmedian\tp95\tn\t")
	for _, v := range b.vars {
		fmt.Fprintf(tw, "%s\tADD\t%s\t%s\t%d\t\n", v.name, ms(median(v.addTimes)), ms(percentile(v.addTimes, 95)), len(v.addTimes))
		fmt.Fprintf(tw, "%s\tDEL\t%s\t%s\t%d\t\n", v.name, ms(median(v.delTimes)), ms(percentile(v.delTimes, 95)), len(v.delTimes))
	}
	_ = tw.Flush()

	catena, plain := b.vars[0], b.vars[1]
	addRatio := ratio(median(catena.addTimes), median(plain.addTimes))
	delRatio := ratio(median(catena.delTimes), median(plain.delTimes))
	fmt.Fprintf(w, "\nratio catena/plain (medians): ADD %.3f  DEL %.3f\n", addRatio, delRatio)
	over := addRatio > target || delRatio > target
	verdict := "met"
	if over {
		verdict = "NOT met"
	}
	fmt.Fprintf(w, "target: ratio <= %.2f for ADD and DEL: %s\n", target, verdict)
	return over
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile returns the nearest-rank p-th percentile.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}
