package leaks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
)

// VerbRelease is the journal's verb of a release.
const VerbRelease = "RELEASE"

// Released is what one release did: the findings of one owner and one
// delegate, the delegate's DEL, and whether they are gone.
type Released struct {
	Owner    Owner     `json:"owner"`
	Delegate Delegate  `json:"delegate"`
	Items    []string  `json:"items"`
	Error    string    `json:"error,omitempty"`
	DryRun   bool      `json:"dryRun,omitempty"`
	Findings []Finding `json:"-"`
}

// Releaser releases confirmed leaks by their owner, through the DEL of the
// delegate that made them, with the config the owner's libcni cache entry
// holds when it has one, else the network's config as the conf dir has
// it, the owner's container ID and ifname and no CNI_NETNS: host-local
// frees what that owner holds, portmap removes that owner's chain. It
// never removes a file, an address or a rule itself.
type Releaser struct {
	Fs                afero.Fs
	ConfDir, CacheDir string
	// CNIPath is where the delegates are found.
	CNIPath string
	Exec    libchain.Executor
	// NAT reads the nat table, to check a portmap chain before and after.
	NAT func(ctx context.Context) ([]byte, error)
	// OnOp journals each release (events.OnOp).
	OnOp        func(events.Op)
	LockTimeout time.Duration
	// DryRun checks everything and DELs nothing.
	DryRun bool
}

// Release releases findings, one DEL per owner and delegate, the later
// delegates of a config first. It returns what it did; a release that
// failed leaves its findings in place and says why.
func (r *Releaser) Release(ctx context.Context, findings []Finding) []Released {
	groups := map[string]*Released{}
	var order []string
	for _, f := range findings {
		if f.Delegate == nil {
			continue
		}
		k := fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%s", f.Owner.Network, f.Owner.ContainerID, f.Owner.IfName, f.Delegate.Index, f.CachedConfig)
		g, ok := groups[k]
		if !ok {
			g = &Released{Owner: f.Owner, Delegate: *f.Delegate, DryRun: r.DryRun}
			groups[k] = g
			order = append(order, k)
		}
		g.Items = append(g.Items, f.Item)
		g.Findings = append(g.Findings, f)
	}
	slices.SortStableFunc(order, func(a, b string) int {
		ga, gb := groups[a], groups[b]
		if c := strings.Compare(ga.Owner.Network+ga.Owner.ContainerID, gb.Owner.Network+gb.Owner.ContainerID); c != 0 {
			return c
		}
		return gb.Delegate.Index - ga.Delegate.Index
	})
	nets, _ := readNetworks(r.Fs, r.ConfDir)
	out := make([]Released, 0, len(order))
	for _, k := range order {
		g := groups[k]
		if err := r.releaseOne(ctx, nets[g.Owner.Network], g); err != nil {
			g.Error = err.Error()
		}
		out = append(out, *g)
	}
	return out
}

func (r *Releaser) releaseOne(ctx context.Context, n *network, g *Released) (err error) {
	o := g.Owner
	from := "the conf dir's"
	if path := g.Findings[0].CachedConfig; path != "" {
		// The config the owner's ADD ran with, as the runtime cached it.
		c, err := readCachedConf(r.Fs, path)
		switch {
		case err != nil:
			return fmt.Errorf("network %s: %w", o.Network, err)
		case c.owner.Network != o.Network || c.owner.ContainerID != o.ContainerID || c.owner.IfName != o.IfName:
			return fmt.Errorf("network %s: libcni cache entry %s is of %s/%s/%s now", o.Network, path, c.owner.Network, c.owner.ContainerID, c.owner.IfName)
		}
		n, from = c.net, "the libcni cache entry's"
	}
	if n == nil {
		return fmt.Errorf("network %s: no config in %s now", o.Network, r.ConfDir)
	}
	conf, err := n.pluginConf(g.Delegate.Index)
	if err != nil {
		return err
	}
	var p plugin
	if err := json.Unmarshal(conf, &p); err != nil || p.Type != g.Delegate.Type {
		return fmt.Errorf("network %s: plugin %d of %s config is %q now, not %s", o.Network, g.Delegate.Index, from, p.Type, g.Delegate.Type)
	}
	if g.Delegate.Type == "portmap" {
		// portmap's DEL does nothing without the port mappings; it
		// removes the chains it derives from the owner's container ID.
		if conf, err = withPortMappings(conf, g.Findings); err != nil {
			return err
		}
	}
	key := cache.Key{Network: o.Network, ContainerID: o.ContainerID, IfName: o.IfName}
	if err := key.Validate(); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	unlock, err := r.lock(ctx, key)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, unlock()) }()
	for _, f := range g.Findings {
		if err := r.stillThere(ctx, f); err != nil {
			return fmt.Errorf("%s %s: %w", f.Kind, f.Item, err)
		}
	}
	if r.DryRun {
		return nil
	}
	start := time.Now()
	call := libchain.Call{Verb: "DEL", Type: g.Delegate.Type, Config: conf,
		Args: libchain.RuntimeArgs{ContainerID: o.ContainerID, IfName: o.IfName, Path: r.CNIPath}}
	derr := r.Exec.Run(ctx, call)
	var left []string
	if derr == nil {
		for _, f := range g.Findings {
			if r.stillThere(ctx, f) == nil {
				left = append(left, f.Item)
			}
		}
	}
	op := events.Op{Verb: VerbRelease, Attachment: key.String(), Start: start, Duration: time.Since(start), Outcome: "ok",
		Calls: []events.OpCall{{Index: g.Delegate.Index, Type: g.Delegate.Type, Verb: "DEL", Duration: time.Since(start)}}}
	switch {
	case derr != nil:
		err = fmt.Errorf("delegate %d (%s) DEL of %s: %w", g.Delegate.Index, g.Delegate.Type, key, derr)
		op.Calls[0].Error = derr.Error()
	case len(left) > 0:
		err = fmt.Errorf("delegate %d (%s) DEL of %s succeeded, but %s still held", g.Delegate.Index, g.Delegate.Type, key, strings.Join(left, ", "))
	}
	if err != nil {
		op.Outcome, op.Error = "error", err.Error()
	}
	if r.OnOp != nil {
		r.OnOp(op)
	}
	return err
}

// stillThere re-checks, under the owner's lock, that f is as the reports
// saw it: the reservation's file still names the owner, the chain is still
// in the nat table with the owner's comment.
func (r *Releaser) stillThere(ctx context.Context, f Finding) error {
	switch f.Kind {
	case KindHostLocal:
		b, err := fileutil.ReadSmallFile(r.Fs, f.Evidence, maxReservation, true)
		if err != nil {
			return fmt.Errorf("the reservation: %w", err)
		}
		lines := reservationLines(b)
		if len(lines) < 1 || lines[0] != f.Owner.ContainerID || (f.Owner.IfName != "" && (len(lines) < 2 || lines[1] != f.Owner.IfName)) {
			return errors.New("the reservation has another owner now")
		}
		return nil
	case KindFlannel:
		if _, err := fileutil.Lstat(r.Fs, f.Evidence); err != nil {
			return fmt.Errorf("the scratch file: %w", err)
		}
		return nil
	case KindPortmap:
		if r.NAT == nil {
			return errors.New("the nat table cannot be read")
		}
		out, err := r.NAT(ctx)
		if err != nil {
			return err
		}
		if !bytes.Contains(out, []byte(f.Evidence)) {
			return errors.New("the chain's rule is gone or changed")
		}
		return nil
	}
	return fmt.Errorf("a %s is never released here", f.Kind)
}

// lock takes Catena's lock of the owner's attachment, so that no catena
// operation on it runs during the release.
func (r *Releaser) lock(ctx context.Context, key cache.Key) (func() error, error) {
	if _, err := os.Stat(r.CacheDir); err != nil {
		return nil, fmt.Errorf("catena's cache dir: %w", err)
	}
	timeout := r.LockTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u, err := cache.NewFlockLocker(filepath.Join(r.CacheDir, cache.LocksDir)).Lock(lctx, key,
		cache.Holder{PID: os.Getpid(), Verb: VerbRelease, Since: time.Now()})
	if err != nil {
		return nil, fmt.Errorf("lock of %s: %w", key, err)
	}
	return u.Unlock, nil
}

// dnatPorts are the protocol and host ports of portmap's jump rule.
var (
	dnatProto = regexp.MustCompile(` -p (tcp|udp|sctp) `)
	dnatPorts = regexp.MustCompile(` --dports ([0-9,]+) `)
)

// withPortMappings is conf with the runtimeConfig portmap's DEL needs: the
// owner's port mappings as its jump rules name them.
func withPortMappings(conf []byte, fs []Finding) ([]byte, error) {
	var maps []map[string]any
	for _, f := range fs {
		proto, ports := dnatProto.FindStringSubmatch(f.Evidence), dnatPorts.FindStringSubmatch(f.Evidence)
		if proto == nil || ports == nil {
			return nil, fmt.Errorf("portmap %s: no protocol or port in its rule", f.Item)
		}
		for _, p := range strings.Split(ports[1], ",") {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, fmt.Errorf("portmap %s: port %q: %w", f.Item, p, err)
			}
			maps = append(maps, map[string]any{"hostPort": n, "containerPort": n, "protocol": proto[1]})
		}
	}
	var m map[string]any
	if err := json.Unmarshal(conf, &m); err != nil {
		return nil, err
	}
	m["runtimeConfig"] = map[string]any{"portMappings": maps}
	return json.Marshal(m)
}
