package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Phase (g) check: CHECK where CRI-O puts it, right after every ADD (and
// again after a restart), so that its cost is on every pod's start. The
// same chain as (a) and (b), through cnitool, catena against the plain
// conflist in the same run:
//
//	seq:   per iteration, each variant in a fresh netns: ADD, CHECK, DEL
//	       (the DEL untimed), the variants alternating which goes first
//	burst: -conc ADDs at once, then -conc CHECKs at once, then -conc DELs,
//	       per variant, alternating, -conc-rounds rounds
//
// Beside them, as the yardstick of CHECK's own cost, catena's cheapest call
// on an attachment: a DEL with no record (an attachment never added, so no
// delegate runs), catena exec'd by the bench with the stdin libcni would
// give it (no cnitool), one per sequential iteration and a burst of -conc
// per round. CHECK's own cost is the catena CHECK less the plain CHECK of
// the same iteration: both run the same three delegate CHECKs, so what is
// left is catena's process and its work (lock, record, prevResult, journal).

// checkResult is phase (g).
type checkResult struct {
	// seq: index i of each slice is measured iteration i.
	add, check  map[string][]sample // by variant name
	delNoRecord []sample            // catena alone
	// bursts: index r of each slice is round r.
	burstAdd, burstCheck map[string][]burst
	burstDelNoRecord     []burst
	conc                 int
	loadBefore           string
	loadAfter            string
}

func (b *bench) checkPhase(ctx context.Context) (_ *checkResult, err error) {
	o := b.opts
	res := &checkResult{add: map[string][]sample{}, check: map[string][]sample{}, burstAdd: map[string][]burst{},
		burstCheck: map[string][]burst{}, conc: o.conc, loadBefore: loadAvg()}
	nr, err := b.newNoRecord()
	if err != nil {
		return nil, fmt.Errorf("(g) %w", err)
	}
	defer func() { err = errors.Join(err, ipCmd("netns", "del", nr.netnsName)) }()

	fmt.Fprintf(os.Stderr, "bench: (g) check: %d warm-up + %d measured sequential iterations\n", o.warmup, o.checkN)
	for i := range o.warmup + o.checkN {
		measured := i >= o.warmup
		for _, v := range b.checkOrder(i) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			if v == nil {
				del, err := nr.call(fmt.Sprintf("s%d", i))
				if err != nil {
					return nil, fmt.Errorf("(g) DEL with no record, iteration %d: %w", i, err)
				}
				res.delNoRecord = appendIf(measured, res.delNoRecord, del)
				continue
			}
			add, check, err := b.addCheckDel(v, fmt.Sprintf("g%d", i))
			if err != nil {
				return nil, fmt.Errorf("(g) %s iteration %d: %w", v.name, i, err)
			}
			res.add[v.name] = appendIf(measured, res.add[v.name], add)
			res.check[v.name] = appendIf(measured, res.check[v.name], check)
		}
		if measured && (i-o.warmup+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "bench: (g) %d/%d\n", i-o.warmup+1, o.checkN)
		}
	}

	fmt.Fprintf(os.Stderr, "bench: (g) bursts: %d rounds of %d ADDs at once, then %d CHECKs, then %d DELs, per variant; %d DELs with no record\n",
		o.concRounds, o.conc, o.conc, o.conc, o.conc)
	for r := range o.concRounds {
		for _, v := range b.checkOrder(r) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			if v == nil {
				d, err := burstOf(o.conc, func(i int) (sample, error) { return nr.call(fmt.Sprintf("b%d-%d", r, i)) })
				if err != nil {
					return nil, fmt.Errorf("(g) DEL with no record, round %d: %w", r, err)
				}
				res.burstDelNoRecord = append(res.burstDelNoRecord, d)
				continue
			}
			add, check, err := b.burstAddCheckDel(v, r)
			if err != nil {
				return nil, fmt.Errorf("(g) %s round %d: %w", v.name, r, err)
			}
			res.burstAdd[v.name] = append(res.burstAdd[v.name], add)
			res.burstCheck[v.name] = append(res.burstCheck[v.name], check)
		}
	}
	res.loadAfter = loadAvg()
	return res, nil
}

// checkOrder is the order of iteration (or round) i: the two variants as
// order gives them, and the DEL with no record (nil) first on even i and
// last on odd ones.
func (b *bench) checkOrder(i int) []*variant {
	vs := b.order(i)
	if i%2 == 0 {
		return append([]*variant{nil}, vs...)
	}
	return append(vs, nil)
}

func appendIf(ok bool, s []sample, v sample) []sample {
	if !ok {
		return s
	}
	return append(s, v)
}

// addCheckDel runs ADD, CHECK and DEL of v in a fresh netns and returns the
// ADD's and the CHECK's samples. The netns is created and deleted outside
// the timed calls.
func (b *bench) addCheckDel(v *variant, tag string) (add, check sample, err error) {
	ns := fmt.Sprintf("cbench-%d-%s-%s", os.Getpid(), v.name, tag)
	path, err := b.addNetns(ns, v)
	if err != nil {
		return add, check, err
	}
	c := call{v: v, verb: "add", netns: path, port: v.hostPort}
	if add, err = b.invokeCPU(c); err != nil {
		return add, check, fmt.Errorf("ADD: %w", err)
	}
	c.verb = "check"
	if check, err = b.invokeCPU(c); err != nil {
		return add, check, fmt.Errorf("CHECK: %w", err)
	}
	c.verb = "del"
	if _, err = b.invokeCPU(c); err != nil {
		return add, check, fmt.Errorf("DEL: %w", err)
	}
	return add, check, b.delNetns(ns)
}

// burstAddCheckDel creates opts.conc netns, ADDs them all at once, CHECKs
// them all at once, DELs them all at once (untimed), and deletes the netns.
func (b *bench) burstAddCheckDel(v *variant, round int) (add, check burst, err error) {
	calls := make([]call, b.opts.conc)
	names := make([]string, b.opts.conc)
	for i := range calls {
		names[i] = fmt.Sprintf("cbench-%d-%s-g%d-%d", os.Getpid(), v.name, round, i)
		path, err := b.addNetns(names[i], v)
		if err != nil {
			return add, check, err
		}
		calls[i] = call{v: v, verb: "add", netns: path, port: v.hostPort + 1000 + i}
	}
	if add, err = b.burst(calls); err != nil {
		return add, check, fmt.Errorf("ADD: %w", err)
	}
	for i := range calls {
		calls[i].verb = "check"
	}
	if check, err = b.burst(calls); err != nil {
		return add, check, fmt.Errorf("CHECK: %w", err)
	}
	for i := range calls {
		calls[i].verb = "del"
	}
	if _, err = b.burst(calls); err != nil {
		return add, check, fmt.Errorf("DEL: %w", err)
	}
	for _, ns := range names {
		if err := b.delNetns(ns); err != nil {
			return add, check, err
		}
	}
	return add, check, nil
}

// noRecord runs catena's DEL of attachments that were never added.
type noRecord struct {
	catena, cniPath string
	netnsName       string
	netns           string // its path
	stdin           []byte
}

// newNoRecord prepares the DELs with no record: the catena variant's
// stdin, and a netns of their own (which none of them enters).
func (b *bench) newNoRecord() (*noRecord, error) {
	stdin, err := pluginStdin(renderConflist(b.catena), b.catena.hostPort)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("cbench-%d-norecord", os.Getpid())
	if err := ipCmd("netns", "add", name); err != nil {
		return nil, err
	}
	return &noRecord{catena: filepath.Join(b.opts.cniPath, "catena"), cniPath: b.opts.cniPath, netnsName: name,
		netns: filepath.Join("/var/run/netns", name), stdin: stdin}, nil
}

// call runs one catena DEL, for the attachment "cbench-<pid>-nr-<tag>",
// never added, and returns its sample.
func (nr *noRecord) call(tag string) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, nr.catena)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CNI_PATH=" + nr.cniPath, "CNI_COMMAND=DEL",
		fmt.Sprintf("CNI_CONTAINERID=cbench-%d-nr-%s", os.Getpid(), tag), "CNI_IFNAME=eth0", "CNI_NETNS=" + nr.netns}
	cmd.Stdin = bytes.NewReader(nr.stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("catena DEL: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return sample{wall: elapsed, cpu: cpuOf(cmd.ProcessState)}, nil
}

// pluginStdin is what libcni gives the first plugin of conflist on its
// stdin: the plugin's config with the list's cniVersion and name, and the
// runtimeConfig of the one port mapping (the plugin declares the
// portMappings capability).
func pluginStdin(conflist []byte, hostPort int) ([]byte, error) {
	var list struct {
		CNIVersion json.RawMessage              `json:"cniVersion"`
		Name       json.RawMessage              `json:"name"`
		Plugins    []map[string]json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(conflist, &list); err != nil {
		return nil, fmt.Errorf("parse conflist: %w", err)
	}
	if len(list.Plugins) == 0 {
		return nil, errors.New("parse conflist: no plugins")
	}
	conf := list.Plugins[0]
	conf["cniVersion"], conf["name"] = list.CNIVersion, list.Name
	conf["runtimeConfig"] = fmt.Appendf(nil, `{"portMappings":[{"hostPort":%d,"containerPort":80,"protocol":"tcp"}]}`, hostPort)
	return json.Marshal(conf)
}
