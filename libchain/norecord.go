package libchain

import (
	"context"

	"github.com/catena-cni/catena/cache"
)

// delNoRecord is a DEL that finds no record of its attachment. What
// Engine.Orphans finds of it is adopted and torn down first (delOrphan).
// Failing that, a DEL handed the result of an ADD as its prevResult
// releases best-effort what the delegates hold (releaseNoRecord), and a
// DEL without one invokes nothing. Either succeeds: a DEL with no record
// never wedges a sandbox.
//
// libcni's DelNetworkList (v1.3.1) passes as prevResult the result it
// cached in AddNetworkList, which caches one only once every plugin's ADD
// succeeded; it removes it once a DelNetworkList succeeds, and reads none
// for a conflist below CNI 0.4.0. So the runtimes' DELs after a failed
// ADD, containerd 2.4's second DEL of Remove and a DEL of an attachment
// never added carry none; one that does, with no record behind it, is the
// DEL of a completed ADD whose record was lost (the cache dir wiped, the
// file deleted), or a repeat of a DEL that completed while its runtime
// died before it could forget the result. The plain chain's DEL frees
// what the delegates hold in both cases; Catena's must not free less.
func (e *Engine) delNoRecord(ctx context.Context, req Request, key cache.Key) error {
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
// version, as a recorded teardown passes the latest result.
//
// It passes no CNI_NETNS: with no record there is no namespace identity
// to prove that the runtime's path still holds the ADD's namespace
// (teardownNetNS), and the spec allows a DEL without one: bridge,
// host-local and portmap free what they hold outside the namespace (an IP
// by container ID, a rule) and enter none that may be another pod's.
//
// Each failure is logged with the attachment and the delegate, and
// journaled in Op.NoRecordRelease; the DEL succeeds whatever the
// delegates answer. Nothing is recorded: a repeated DEL repeats the DELs,
// which the spec requires to succeed on missing state.
func (e *Engine) releaseNoRecord(ctx context.Context, req Request, key cache.Key) {
	e.log().Warn("DEL found no record but was handed the result of an ADD: releasing best-effort, without CNI_NETNS, what the delegates hold",
		"attachment", key.String(), "delegates", len(req.Conf.Delegates))
	args := req.Args
	args.NetNS = ""
	failed := e.delEvery(ctx, req, key, args, req.Conf.PrevResult, "best-effort DEL with no record failed")
	traceOf(ctx).released(OpRelease{Delegates: len(req.Conf.Delegates), Failed: failed})
}
