package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/invoke"
)

// Attachment is one entry of cni.dev/valid-attachments.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

// GCOptions says what CollectGarbage may reclaim.
type GCOptions struct {
	// Valid is the runtime's list of live attachments on this network.
	Valid []Attachment
	// StaleNetNS replaces the valid list (for catenactl, without a
	// runtime): a record is stale only if its netns path is gone, it is
	// older than the grace period and its lock is free. Delegates are then
	// never asked to GC.
	StaleNetNS bool
	// GracePeriod overrides the config's gcGracePeriod when positive.
	GracePeriod time.Duration
	// DryRun reports what would be torn down and changes nothing.
	DryRun bool
	// SkipDelegates does not forward GC to the delegates.
	SkipDelegates bool
}

// GCSkip is a record GC (or repair) left alone, and why.
type GCSkip struct {
	Key    cache.Key `json:"key"`
	Reason string    `json:"reason"`
}

// GCReport is what CollectGarbage did.
type GCReport struct {
	TornDown      []cache.Key `json:"tornDown"`
	WouldTearDown []cache.Key `json:"wouldTearDown,omitempty"`
	Skipped       []GCSkip    `json:"skipped"`
	Errors        []string    `json:"errors"`
	// KeptAlive is what the delegates were told is valid on top of the
	// runtime's list: attachments Catena still tracks.
	KeptAlive []Attachment `json:"keptAlive,omitempty"`
	// SweptTemps are temp files that crashes left, older than the grace
	// period, that GC removed.
	SweptTemps []string `json:"sweptTemps,omitempty"`
	// PrunedQuarantine are quarantined records that GC removed, past
	// cache.QuarantineMaxAge or beyond the cache.QuarantineMaxCount newest.
	PrunedQuarantine []string `json:"prunedQuarantine,omitempty"`
}

// CollectGarbage tears down Catena's records on req's network that are not
// valid, then forwards GC to the delegates with a widened valid list.
//
// In-flight safety: the time and the valid list are fixed before any record
// is read; a record whose lock is held (an operation is running) or that is
// younger than the grace period is skipped. A record that needs teardown (a
// failed rollback or DEL, or an operation that died) is retried even when
// listed as valid: its teardown was already decided, and no complete ADD
// stands behind it. A listed, complete attachment is never touched.
//
// Liveness: a record GC would tear down because the runtime does not list
// it (or, with StaleNetNS, because its netns is stale) is kept while the
// namespace of its ADD still holds a process, as Engine.Procs sees it in
// one scan per GC (stillAlive): a runtime's list comes from its own state,
// and a sandbox it forgot still runs. An empty list (null or []) proves
// nothing: under it a record is torn down only if its netns path is gone
// or holds another namespace.
//
// The delegates get the runtime's list plus every attachment Catena keeps
// alive (skipped, or still needing teardown), so that a delegate's own GC
// never reclaims what Catena still tracks, even if the runtime breaks the
// spec's rule of no GC during ADD or DEL.
//
// It hands Engine.OnOp (the event journal) one GC operation of the
// network, whose calls are the GCs forwarded to the delegates, and one GC
// operation per attachment it tears down, whose calls are that
// attachment's DELs: a reader of the journal sees each attachment GC
// released or left held as it sees a DEL's, however many there are. A dry
// run changes nothing and hands over nothing.
func (e *Engine) CollectGarbage(ctx context.Context, req Request, opts GCOptions) (rep *GCReport, err error) {
	if !opts.DryRun {
		var t *opTrace
		ctx, t = e.begin(ctx, "GC", cache.Key{})
		defer func() { e.finish(t, req.Conf.SlowThreshold, err) }()
	}
	return e.collectGarbage(ctx, req, opts)
}

// collectGarbage is CollectGarbage within the operation that ctx traces.
func (e *Engine) collectGarbage(ctx context.Context, req Request, opts GCOptions) (*GCReport, error) {
	now := e.now()
	valid := make(map[Attachment]bool, len(opts.Valid))
	for _, a := range opts.Valid {
		valid[a] = true
	}
	grace := opts.GracePeriod
	if grace <= 0 {
		grace = req.Conf.GCGracePeriod
	}
	rep := &GCReport{TornDown: []cache.Key{}, Skipped: []GCSkip{}, Errors: []string{}}
	if req.Conf.DisableGC {
		return rep, nil
	}
	keys, err := e.Store.List()
	if err != nil {
		return rep, cniError(types.ErrIOFailure, "GC of network %q: listing records: %w", req.Conf.Name, err)
	}
	look := &procLook{scanner: e.Procs}
	for _, key := range keys {
		if key.Network != req.Conf.Name {
			continue
		}
		e.collectOne(ctx, req, key, gcPass{now: now, grace: grace, valid: valid, opts: opts, look: look}, rep)
	}
	if !opts.DryRun {
		swept, err := e.Store.SweepTemps(req.Conf.Name, now.Add(-grace))
		rep.SweptTemps = swept
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		if p, ok := e.Store.(cache.QuarantinePruner); ok {
			pruned, err := p.PruneQuarantine(now, cache.QuarantineMaxAge, cache.QuarantineMaxCount)
			rep.PrunedQuarantine = pruned
			if err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			}
		}
		e.pruneTombstones(req.Conf.Name)
	}
	if opts.StaleNetNS || opts.SkipDelegates || opts.DryRun {
		return rep, reportErr(req, rep)
	}
	if err := e.forwardHeld(ctx, req, opts.Valid, valid, rep); err != nil {
		rep.Errors = append(rep.Errors, msgOf(err))
	}
	return rep, reportErr(req, rep)
}

// forwardHeld forwards GC to the delegates at 1.1.0 or later one at a
// time: for each, it takes the network's barrier exclusive (barrier.go),
// lists the records, and sends that delegate's GC with every record of the
// network in its valid list; it then releases the barrier before the next
// delegate.
//
// Safety: while a delegate's GC runs, no ADD can write its record, and an
// ADD's first delegate gets its request only after its record is written
// (under the barrier shared). So every ADD that reached this delegate, or
// will while its GC runs, wrote its record before the barrier was taken,
// and the listing made under it, after the teardowns, has it: the
// delegate never sees a list that omits an attachment it holds. An ADD
// that wrote its record after the barrier was released is in no earlier
// delegate's list, but reached none of them before its GC was over.
//
// The bound: each delegate's GC runs within gcForwardBound, which shares
// a third of lockTimeout among the delegates, counted from when the
// barrier is taken, output included: the delegate is killed with its
// process group a quarter of the bound before the bound's end
// (invoke/spawn.go), and its output is read for that last quarter at most
// (invoke.WithOutputGrace), so that a descendant that escaped its group
// and holds its stdout open cannot stretch the hold by the executor's 10 s
// output grace. It acts on no list after the barrier is released. A GC
// holds the barrier for at most lockTimeout/3 and its
// listings in all, so an ADD's wait for it stays well under the ADD's
// lockTimeout, whatever the delegates do; between two delegates GC waits
// gcYield, so that the ADDs that queued meanwhile go first and usually
// wait for one delegate's GC only. A GC cut at its bound is reported; the
// runtime's next GC tries again. The teardowns (collectOne) run before,
// without the barrier.
func (e *Engine) forwardHeld(ctx context.Context, req Request, runtime []Attachment, valid map[Attachment]bool, rep *GCReport) error {
	var errs []error
	var targets []Delegate
	for _, d := range req.Conf.Delegates {
		// Resolved before the barrier: a VERSION not cached may take a while.
		d, err := e.resolve(ctx, req, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if atLeast(d.CNIVersion, "1.1.0") {
			targets = append(targets, d)
		}
	}
	bounded := *req.Conf
	bounded.DelegateTimeout = gcForwardBound(req.Conf, len(targets))
	breq := Request{Conf: &bounded, Args: req.Args}
	for i, d := range targets {
		if i > 0 {
			sleepCtx(ctx, gcYield)
		}
		err := e.forwardOneHeld(ctx, breq, d, len(targets), runtime, valid, rep)
		if errors.Is(err, errNoBarrier) && i+1 < len(targets) {
			// Each try waits lockTimeout: the rest would wait as long.
			rest := make([]string, 0, len(targets)-i-1)
			for _, r := range targets[i+1:] {
				rest = append(rest, r.String())
			}
			err = fmt.Errorf("%w; nor to %s", err, strings.Join(rest, ", "))
		}
		if errors.Is(err, errNoBarrier) {
			return errors.Join(append(errs, err)...)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gcYield is how long GC leaves the network's barrier free between two
// delegates: twice the longest wait between two tries of a waiting ADD
// (the flock barrier polls at most every 25 ms).
const gcYield = 50 * time.Millisecond

// errNoBarrier is the error of a GC forward that could not take the barrier.
var errNoBarrier = errors.New("the network barrier was not taken")

// gcForwardBound is how long one delegate's GC may run while GC holds the
// network's barrier: its delegateTimeout, but at most a third of
// lockTimeout shared among the n delegates GC is forwarded to, so that an
// ADD waiting for the barrier meanwhile never reaches its lockTimeout.
func gcForwardBound(conf *NetConf, n int) time.Duration {
	return min(conf.DelegateTimeout, conf.LockTimeout/time.Duration(3*max(n, 1)))
}

// forwardOneHeld forwards GC to d under the network's barrier, with the
// runtime's list widened by every record of the network (forwardHeld).
func (e *Engine) forwardOneHeld(ctx context.Context, req Request, d Delegate, n int, runtime []Attachment,
	valid map[Attachment]bool, rep *GCReport) error {
	release, err := e.holdNetwork(ctx, req, "GC", true)
	if err != nil {
		return fmt.Errorf("GC not forwarded to %s: %w: %w", d, errNoBarrier, err)
	}
	defer release()
	// The whole hold fits in the bound (req's delegateTimeout), the
	// listing and the delegate's output included: the delegate is killed
	// a quarter of the bound before its end, and its output is read for
	// that quarter at most.
	grace := req.Conf.DelegateTimeout / 4
	fctx, cancel := context.WithTimeout(invoke.WithOutputGrace(ctx, grace), req.Conf.DelegateTimeout-grace)
	defer cancel()
	keys, err := e.Store.List()
	if err != nil {
		return cniError(types.ErrIOFailure, "GC of network %q: listing records, GC not forwarded to %s: %w", req.Conf.Name, d, err)
	}
	kept := make(map[Attachment]bool, len(rep.KeptAlive))
	for _, a := range rep.KeptAlive {
		kept[a] = true
	}
	for _, key := range keys {
		a := Attachment{ContainerID: key.ContainerID, IfName: key.IfName}
		if key.Network != req.Conf.Name || valid[a] || kept[a] {
			continue
		}
		kept[a] = true
		rep.Skipped = append(rep.Skipped, GCSkip{Key: key, Reason: "recorded after GC listed the network (an ADD meanwhile)"})
		rep.KeptAlive = append(rep.KeptAlive, a)
	}
	widened := append([]Attachment{}, runtime...)
	seen := maps.Clone(valid)
	for _, a := range rep.KeptAlive {
		if !seen[a] {
			seen[a] = true
			widened = append(widened, a)
		}
	}
	err = e.forwardGC(fctx, req, d, widened)
	if isTimeout(err) && ctx.Err() == nil {
		err = fmt.Errorf("%w (cut at %s: ADDs on network %q wait while a delegate's GC holds its barrier, so each gets delegateTimeout, "+
			"at most a third of lockTimeout shared among the %d delegates, its output included; the next GC tries again)", err, req.Conf.DelegateTimeout, req.Conf.Name, n)
	}
	return err
}

func reportErr(req Request, rep *GCReport) error {
	if len(rep.Errors) == 0 {
		return nil
	}
	errs := make([]error, len(rep.Errors))
	for i, m := range rep.Errors {
		errs[i] = errors.New(m)
	}
	return cniError(types.ErrInternal, "GC of network %q: %w", req.Conf.Name, errors.Join(errs...))
}

// gcPass is what one GC fixed before it read any record.
type gcPass struct {
	now   time.Time
	grace time.Duration
	valid map[Attachment]bool
	opts  GCOptions
	look  *procLook
}

// collectOne decides on one record under its lock, taken without waiting.
func (e *Engine) collectOne(ctx context.Context, req Request, key cache.Key, p gcPass, rep *GCReport) {
	att := Attachment{ContainerID: key.ContainerID, IfName: key.IfName}
	keep := func(reason string) {
		rep.Skipped = append(rep.Skipped, GCSkip{Key: key, Reason: reason})
		rep.KeptAlive = append(rep.KeptAlive, att)
	}
	unlock, err := e.tryLock(key, "GC")
	if err != nil {
		keep("in flight: " + msgOf(err))
		return
	}
	defer unlock()
	rec, err := e.Store.Load(key)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return // deleted meanwhile
	case err != nil:
		keep("unreadable record, left for DEL or catenactl repair: " + err.Error())
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", key, err))
		return
	}
	if age := p.now.Sub(rec.Created); age < p.grace {
		keep(fmt.Sprintf("younger than the grace period (%s < %s)", age.Round(time.Second), p.grace))
		return
	}
	dead := needsTeardown(rec)
	switch {
	case dead:
	case p.opts.StaleNetNS:
		// Stale: the netns is gone, or another namespace now stands at
		// its path. A record without a netns identity (adopted, or not identified at ADD) whose
		// path exists cannot be judged, and is kept.
		switch state, why := e.netnsState(rec); state {
		case nsNone:
			keep("no netns recorded: staleness cannot be judged")
			return
		case nsSame, nsUnverified, nsSameInode:
			keep(why)
			return
		}
	case p.valid[att]:
		return // live: never touched, and already in the runtime's list
	}
	if !dead {
		if why := e.stillAlive(rec, p.look, len(p.opts.Valid) == 0 && !p.opts.StaleNetNS); why != "" {
			if !p.opts.DryRun {
				e.log().Warn("GC keeps an attachment it would have torn down: "+why, "attachment", key.String(), "netns", rec.NetNS)
			}
			keep(why)
			return
		}
	}
	if p.opts.DryRun {
		rep.WouldTearDown = append(rep.WouldTearDown, key)
		return
	}
	tctx, t := e.begin(ctx, "GC", key)
	err = e.teardown(tctx, req.Conf, rec, argsFor(rec, req.Args.Path), byNobody)
	e.finish(t, req.Conf.SlowThreshold, err)
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %s", key, msgOf(err)))
		rep.KeptAlive = append(rep.KeptAlive, att)
		return
	}
	rep.TornDown = append(rep.TornDown, key)
}

// needsTeardown reports whether a record, read with its lock free, is left
// over: a failed rollback or DEL, or an ADD or DEL whose process died (the
// lock is held for a whole operation, so a free lock means nobody runs it).
func needsTeardown(rec *cache.Record) bool {
	return rec.Phase != cache.PhaseComplete
}

// argsFor rebuilds the runtime arguments of a record's own attachment for a
// teardown that no runtime asked for (byNobody): the ADD's netns, which the
// teardown passes on only while the file at its path is still that
// namespace (else none, as in a DEL after the sandbox is gone; see
// teardownNetNS), and CNI_ARGS.
func argsFor(rec *cache.Record, path string) RuntimeArgs {
	return RuntimeArgs{ContainerID: rec.Key.ContainerID, IfName: rec.Key.IfName, Args: rec.Args, Path: path, NetNS: rec.NetNS}
}

// The keys of the valid list on GC: the spec's, and the name its first
// text gave it, which libcni sends too (containernetworking/cni#1101).
const (
	validListKey   = "cni.dev/valid-attachments"
	attachmentsKey = "cni.dev/attachments"
)

// forwardGC sends GC to delegate d with the given valid list, under both
// keys, within the request's delegateTimeout.
func (e *Engine) forwardGC(ctx context.Context, req Request, d Delegate, valid []Attachment) error {
	list, err := json.Marshal(valid)
	if err != nil {
		return fmt.Errorf("GC of %s: encoding valid attachments: %w", d, err)
	}
	extra := map[string]json.RawMessage{validListKey: list, attachmentsKey: list}
	return e.runPlain(ctx, req, d, "GC", extra)
}

// parseValid decodes the runtime's valid list: cni.dev/valid-attachments,
// cni.dev/attachments, or both. Where both are sent and differ, what either
// lists is valid: their union, in order, so that GC collects nothing a
// runtime listed. null is the empty list: libcni marshals a runtime's nil
// list so (CRI-O's, for a network without sandboxes), and its own GC then
// DELs every attachment it cached for the network. A GC with neither key
// is refused: the spec requires the list, and reading its absence as
// "nothing is valid" would reclaim everything for a runtime (or cnitool
// gc) that sends no list at all; so is one with either key malformed.
func parseValid(valid, attachments json.RawMessage) ([]Attachment, error) {
	if len(valid) == 0 && len(attachments) == 0 {
		return nil, configError(validListKey, "missing on GC")
	}
	list := []Attachment{}
	seen := map[Attachment]bool{}
	for _, in := range []struct {
		key string
		raw json.RawMessage
	}{{validListKey, valid}, {attachmentsKey, attachments}} {
		if len(in.raw) == 0 {
			continue
		}
		var l []Attachment
		if err := json.Unmarshal(in.raw, &l); err != nil {
			return nil, configError(in.key, "not a list of {containerID, ifname}: "+err.Error())
		}
		for _, a := range l {
			if !seen[a] {
				seen[a] = true
				list = append(list, a)
			}
		}
	}
	return list, nil
}
