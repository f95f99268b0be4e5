package libchain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/internal/failpoint"
)

// Engine runs chains and keeps their records.
type Engine struct {
	Store cache.Store
	Exec  Executor
	// Log receives warnings and errors; nil discards them. Never stdout.
	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand is where the span IDs of operations and delegate calls come
	// from (tracectx.NewSpanID); nil means crypto/rand. A read that
	// fails is logged and leaves that operation (and so its calls'
	// delegates) or that call's delegate without a trace context, and
	// without a span ID in the journal.
	Rand io.Reader
	// StatNetNS identifies the network namespace at a path; nil means
	// StatNetNS. A teardown no runtime asked for passes a record's netns
	// only while it is still the namespace of the ADD.
	StatNetNS StatNetNSFunc
	// NetNSHolds, if set, lets a DEL with no record pass its CNI_NETNS
	// once the namespace there proves the ADD's (noRecordNetNS); nil: it
	// passes none. The plugin wires NetNSHolds.
	NetNSHolds NetNSHoldsFunc
	// Procs, if set, is scanned at most once per GC, when a record the
	// runtime no longer lists (or whose netns is stale) would be torn
	// down: a record whose ADD's namespace still holds a process is kept
	// (gcalive.go). The mains wire ProcScanner; nil: no such look.
	Procs ProcessScanner
	// OnOp, if set, receives the summary of every operation (the event
	// journal), after it is logged.
	OnOp func(Op)
	// Orphans, if set, is asked by a DEL that finds no record for the
	// attachment as the node's primary CNI made it (orphan.go).
	Orphans OrphanFinder
	// Versions, if set, resolves the version of each delegate whose
	// cniVersion is "auto" (auto.go); without it such a delegate fails.
	Versions VersionProber
	// Retrier, if set, is asked by KickRetry to start a retry pass of
	// pending teardowns outside the runtime's call.
	Retrier RetryKicker
}

// Request is one CNI invocation of Catena.
type Request struct {
	Conf *NetConf
	Args RuntimeArgs
}

// Key is the attachment the request is about.
func (r Request) Key() cache.Key {
	return cache.Key{Network: r.Conf.Name, ContainerID: r.Args.ContainerID, IfName: r.Args.IfName}
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Engine) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.New(slog.DiscardHandler)
}

// validKey checks the attachment key before anything touches the disk.
func validKey(req Request) (cache.Key, error) {
	key := req.Key()
	if err := key.Validate(); err != nil {
		return key, cniErrorCode(types.ErrInvalidEnvironmentVariables, "invalid attachment: %w", err)
	}
	return key, nil
}

// lock takes the attachment's lock within the configured lockTimeout.
func (e *Engine) lock(ctx context.Context, req Request, key cache.Key, verb string) (func(), error) {
	lctx, cancel := context.WithTimeout(ctx, req.Conf.LockTimeout)
	defer cancel()
	start := e.now()
	u, err := e.Store.Lock(lctx, key, cache.Holder{PID: os.Getpid(), Verb: verb, Since: start})
	traceOf(ctx).lockWaited(e.now().Sub(start))
	if err != nil {
		if errors.Is(err, cache.ErrLocked) {
			return nil, cniError(types.ErrTryAgainLater, "%s %s: %w", verb, key, err)
		}
		return nil, cniError(types.ErrIOFailure, "%s %s: taking lock: %w", verb, key, err)
	}
	return e.releaser(u, key), nil
}

// tryLock takes key's lock without waiting, or fails wrapping
// cache.ErrLocked; the returned func releases it.
func (e *Engine) tryLock(key cache.Key, verb string) (func(), error) {
	u, err := e.Store.TryLock(key, cache.Holder{PID: os.Getpid(), Verb: verb, Since: e.now()})
	if err != nil {
		return nil, err
	}
	return e.releaser(u, key), nil
}

// releaser returns the func that releases a lock, logging a failure: the
// operation's outcome is already decided by then.
func (e *Engine) releaser(u cache.Unlocker, key cache.Key) func() {
	return func() {
		if err := u.Unlock(); err != nil {
			e.log().Error("releasing attachment lock", "attachment", key.String(), "error", err)
		}
	}
}

// save durably writes rec, marking the crash points around the write;
// the operation of ctx counts its time (Op.Writes).
func (e *Engine) save(ctx context.Context, rec *cache.Record) error {
	return e.durably(ctx, "before-write", "after-write", func() error { return e.Store.Save(rec) })
}

// remove durably removes the record of key, marking the crash points
// around the removal; the operation of ctx counts its time.
func (e *Engine) remove(ctx context.Context, key cache.Key) error {
	return e.durably(ctx, "before-remove", "after-remove", func() error { return e.Store.Remove(key) })
}

// durably runs one durable change of a record between the crash points
// before and after, and adds its time to ctx's operation.
func (e *Engine) durably(ctx context.Context, before, after string, change func() error) error {
	failpoint.Hit(before)
	start := e.now()
	err := change()
	traceOf(ctx).wrote(e.now().Sub(start))
	failpoint.Hit(after)
	return err
}

func stepName(s *cache.Step) string {
	return fmt.Sprintf("delegate %d (%s)", s.Index, s.Type)
}
