package libchain

import (
	"context"
	"errors"
	"fmt"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/events"
)

// What a DEL with no record did, in OpRelease.Outcome (package journal).
const (
	ReleaseTombstone = events.ReleaseTombstone
	ReleaseKept      = events.ReleaseKept
	ReleaseReleased  = events.ReleaseReleased
	ReleasePartial   = events.ReleasePartial
	ReleaseFailed    = events.ReleaseFailed
)

// delNoRecord is a DEL that finds no record of its attachment. In order:
//
//   - a tombstone of the key (Catena tore the attachment down outside the
//     runtime's DEL: a retry, GC, a reclaim, a repair) invokes nothing and
//     is cleared: the result the runtime still holds names what may be
//     another pod's by now (tombstone.go);
//   - what Engine.Orphans finds of it is adopted and torn down (delOrphan);
//   - handed the result of an ADD as its prevResult, it releases
//     best-effort what the delegates hold, unless something else may hold
//     it (releaseNoRecord);
//   - else it invokes nothing.
//
// Each succeeds: a DEL with no record never wedges a sandbox.
//
// libcni's DelNetworkList (v1.3.1) passes as prevResult the result it
// cached in AddNetworkList, which caches one only once every plugin's ADD
// succeeded; it removes it once a DelNetworkList succeeds, and reads none
// for a conflist below CNI 0.4.0. So the runtimes' DELs after a failed
// ADD, containerd 2.4's second DEL of Remove and a DEL of an attachment
// never added carry none. One that does, with no record behind it, is the
// DEL of a completed ADD whose record was lost (the cache dir wiped, the
// file deleted), or a repeat of a DEL that completed: the runtime's own
// (it died before it could forget the result, or an operator's cnitool
// repeats it), or another teardown's (a tombstone then says so).
func (e *Engine) delNoRecord(ctx context.Context, req Request, key cache.Key) error {
	if e.delTombstoned(ctx, key) {
		return nil
	}
	if adopted, err := e.delOrphan(ctx, req, key); adopted || err != nil {
		return err
	}
	if len(req.Conf.PrevResult) > 0 {
		e.releaseNoRecord(ctx, req, key)
	}
	return nil
}

// releaseNoRecord DELs every delegate of the DEL's config (the one the
// runtime cached at ADD) in reverse, as recoverCorrupt does for a record
// that does not verify, each with the DEL's prevResult converted to its
// version, as a recorded teardown passes the latest result. Before it,
// under the network's barrier held exclusive (so that no ADD of the
// network is between its lock and its first record write), it checks that
// no live record holds what the result names (heldElsewhere): delegates
// such as firewall free by address, and the address may have been given
// to another pod since. On any doubt it invokes nothing.
//
// With no record there is no namespace identity to prove that the
// runtime's path still holds the ADD's namespace (teardownNetNS): it
// passes the runtime's CNI_NETNS only when the namespace there has the
// DEL's ifname holding one of the result's addresses (noRecordNetNS),
// else none, as the spec allows for DEL: bridge, host-local and portmap
// free what they hold outside the namespace (an IP by container ID, a
// rule) and enter none that may be another pod's.
//
// Each failure is logged with the attachment and the delegate, and
// journaled in Op.NoRecordRelease with the outcome; the DEL succeeds
// whatever the delegates answer. Nothing is recorded.
func (e *Engine) releaseNoRecord(ctx context.Context, req Request, key cache.Key) {
	var rel OpRelease
	defer func() { traceOf(ctx).released(rel) }()
	hold, err := e.holdNetworkBounded(ctx, req, "DEL")
	if err != nil {
		rel.Outcome, rel.Reason = ReleaseKept, BoundText(err.Error())
		e.log().Warn("DEL found no record but was handed the result of an ADD: kept, the network's barrier could not be taken",
			"attachment", key.String(), "error", err)
		return
	}
	defer hold()
	want, err := resultIPs(req.Conf.PrevResult)
	why := ""
	if err != nil {
		why = fmt.Sprintf("its prevResult cannot be read: %v", err)
	} else {
		why = e.heldElsewhere(key, want)
	}
	if why != "" {
		rel.Outcome, rel.Reason = ReleaseKept, BoundText(why)
		e.log().Warn("DEL found no record but was handed the result of an ADD: kept, something else may hold what it names",
			"attachment", key.String(), "reason", why)
		return
	}
	args := req.Args
	args.NetNS = e.noRecordNetNS(req, want)
	rel.WithNetNS = args.NetNS != ""
	rel.Delegates = len(req.Conf.Delegates)
	e.log().Warn("DEL found no record but was handed the result of an ADD: releasing best-effort what the delegates hold",
		"attachment", key.String(), "delegates", len(req.Conf.Delegates), "netns", args.NetNS)
	rel.Failed = e.delEvery(ctx, req, key, args, req.Conf.PrevResult, "best-effort DEL with no record failed")
	switch {
	case len(rel.Failed) == 0:
		rel.Outcome = ReleaseReleased
	case len(rel.Failed) < len(req.Conf.Delegates):
		rel.Outcome = ReleasePartial
	default:
		rel.Outcome = ReleaseFailed
	}
}

// holdNetworkBounded takes req's network barrier exclusive for at most a
// third of lockTimeout: the caller already holds an attachment's lock, and
// an ADD of that same attachment may hold the barrier shared while it
// waits for that lock, so the wait must end well before the ADD's does.
func (e *Engine) holdNetworkBounded(ctx context.Context, req Request, verb string) (func(), error) {
	bounded := *req.Conf
	bounded.LockTimeout = max(req.Conf.LockTimeout/3, 1)
	return e.holdNetwork(ctx, Request{Conf: &bounded, Args: req.Args}, verb, true)
}

// heldElsewhere says why the addresses want (a prevResult's) may be held
// by an attachment other than key, or "" if no record says so: a live
// record (any phase, any network) whose results name one of them, a
// record of key's network whose addresses are not known yet (an ADD under
// way, or one whose outcome is unknown), or a record that cannot be read.
// No address has nothing to clash by address: "".
func (e *Engine) heldElsewhere(key cache.Key, want map[string]bool) string {
	if len(want) == 0 {
		return ""
	}
	keys, err := e.Store.List()
	if err != nil {
		return fmt.Sprintf("the records cannot be listed: %v", err)
	}
	for _, k := range keys {
		if k == key {
			continue
		}
		rec, err := e.Store.Load(k)
		if errors.Is(err, cache.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Sprintf("the record of %s cannot be read: %v", k, err)
		}
		held, known := recordIPs(rec)
		for ip := range want {
			if held[ip] {
				return fmt.Sprintf("%s is held by %s", ip, k)
			}
		}
		if !known && k.Network == key.Network {
			return fmt.Sprintf("the addresses of %s (%s) are not known yet", k, rec.Phase)
		}
	}
	return ""
}
