// Command runcwrap is the OCI runtime the CRI-O integration tests give
// CRI-O: it runs runc (the path linked in as main.runc) with the same
// arguments, after raising the oomScoreAdj of the spec it is given to this
// process's own oom_score_adj. CRI-O asks -998 for every pause container,
// and a root without CAP_SYS_RESOURCE (as in a test container) cannot
// lower oom_score_adj below its own: runc would fail every sandbox.
// containerd's restrict_oom_score_adj does the same for its CRI.
//
// It also drops the spec's hugepage limits when no hugetlb cgroup is
// mounted (a cgroup v1 host that lists the controller in /proc/cgroups but
// never mounted it): kubelet asks for one per page size the machine has,
// CRI-O passes them on, and runc fails every container it cannot put in a
// hugetlb cgroup. containerd's tolerate_missing_hugetlb_controller does
// the same for its CRI.
//
// And it keeps only the capabilities in this process's bounding set:
// CRI-O gives a privileged container every capability it knows of, which
// runc cannot grant when this root lacks some (CAP_SYS_RESOURCE, as
// above). containerd gives a privileged container the current ones alone.
//
// It edits the bundle's config.json before create and run (--bundle, -b,
// else the current dir) and the --process (-p) file before exec, through a
// temp file and a rename.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// runc is the real runtime, set at link time.
var runc = "/usr/sbin/runc"

func main() {
	if err := raise(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runcwrap: %v\n", err)
		os.Exit(1)
	}
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "runcwrap: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// raise finds the spec the command reads, if any, and raises its
// oomScoreAdj.
func raise(args []string) error {
	cmd, rest := command(args)
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "--bundle", "-b")
		if bundle == "" {
			bundle = "."
		}
		return raiseIn(filepath.Join(bundle, "config.json"), true)
	case "exec":
		if p := flagValue(rest, "--process", "-p"); p != "" {
			return raiseIn(p, false)
		}
	}
	return nil
}

// globalWithValue are runc's global flags that take a value.
var globalWithValue = map[string]bool{"--log": true, "--log-format": true, "--root": true, "--criu": true, "--rootless": true}

// command splits runc's arguments at its subcommand.
func command(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
		if globalWithValue[a] {
			i++
		}
	}
	return "", nil
}

// flagValue is the value of the first of names in args (--name value,
// --name=value, -n value).
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v
			}
		}
	}
	return ""
}

// raiseIn sets the oomScoreAdj of the spec at path (a whole config.json
// when whole, else a process.json) to at least this process's own, keeps
// only the capabilities this process may grant, and drops a whole spec's
// hugepage limits when no hugetlb cgroup is mounted.
func raiseIn(path string, whole bool) error {
	own, err := ownScore()
	if err != nil {
		return err
	}
	bounding, err := ownBounding()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the spec: %w", err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	changed := false
	proc := spec
	if whole {
		changed = dropHugepageLimits(spec)
		proc, _ = spec["process"].(map[string]any)
	}
	if cur, ok := proc["oomScoreAdj"].(float64); ok && int(cur) < own {
		proc["oomScoreAdj"] = own
		changed = true
	}
	if caps, ok := proc["capabilities"].(map[string]any); ok && keepCapabilities(caps, bounding) {
		changed = true
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".runcwrap-*")
	if err != nil {
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(out); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rewriting the spec: %w", err)
	}
	return nil
}

// dropHugepageLimits removes linux.resources.hugepageLimits from spec when
// no hugetlb cgroup is mounted, and tells whether it did.
func dropHugepageLimits(spec map[string]any) bool {
	linux, _ := spec["linux"].(map[string]any)
	res, _ := linux["resources"].(map[string]any)
	if _, ok := res["hugepageLimits"]; !ok || hugetlbMounted() {
		return false
	}
	delete(res, "hugepageLimits")
	return true
}

// hugetlbMounted tells whether runc can put a container in a hugetlb
// cgroup: a cgroup v1 hierarchy with the controller, or, on a host with
// cgroup v2 alone (mounted at /sys/fs/cgroup), its offering the
// controller. A hybrid host's v2 hierarchy (/sys/fs/cgroup/unified) is not
// used for limits. When the mounts cannot be read it says yes, and the
// spec is left alone.
func hugetlbMounted() bool {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(raw), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup":
			if slices.Contains(strings.Split(g[2], ","), "hugetlb") {
				return true
			}
		case "cgroup2":
			if f[4] != "/sys/fs/cgroup" {
				continue
			}
			ctrls, err := os.ReadFile(filepath.Join(f[4], "cgroup.controllers"))
			if err == nil && slices.Contains(strings.Fields(string(ctrls)), "hugetlb") {
				return true
			}
		}
	}
	return false
}

// capNames are the kernel's capabilities by number.
var capNames = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
	"CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
	"CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"}

// keepCapabilities removes from each set of caps (bounding, effective,
// ...) the capabilities of capNames not in bounding, and tells whether it
// removed any. A name it does not know is left for runc to judge.
func keepCapabilities(caps map[string]any, bounding uint64) bool {
	removed := false
	for set, v := range caps {
		names, ok := v.([]any)
		if !ok {
			continue
		}
		kept := names[:0:0]
		for _, n := range names {
			if i := slices.Index(capNames, fmt.Sprint(n)); i >= 0 && bounding&(1<<i) == 0 {
				removed = true
				continue
			}
			kept = append(kept, n)
		}
		caps[set] = kept
	}
	return removed
}

// ownBounding is this process's capability bounding set (CapBnd).
func ownBounding() (uint64, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading own status: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing own CapBnd: %w", err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no CapBnd in /proc/self/status")
}

// ownScore is this process's oom_score_adj.
func ownScore() (int, error) {
	raw, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0, fmt.Errorf("reading own oom_score_adj: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("parsing own oom_score_adj: %w", err)
	}
	return n, nil
}
