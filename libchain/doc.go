// Package libchain is Catena's chain engine: it runs a chain of delegate CNI
// plugins and keeps a durable record of what each one really did, so that a
// failed ADD is rolled back exactly and a DEL tears down only what is held.
//
// The engine is pure logic over two small interfaces: an Executor (the
// mains wire in libchain/invoke, which runs delegates as processes) and a
// cache.Store; ExampleEngine (example_test.go) runs a chain over both.
// Its sub-packages: invoke (the process machinery), events (the event
// journal every operation is written to), tracectx (the W3C trace
// context the runtime passes, which each operation continues through its
// delegates), libcnientry (the runtime's libcni cache entries a DEL
// adopts), release (Catena's version and the binary's commit, which the
// binaries print), and internal/failpoint and internal/textbound, which
// the engine and invoke share.
//
// Files:
//
//	doc.go            this comment
//	engine.go         Engine and Request: the attachment's lock, the record's writes, the clock and the log
//	verb.go           how ADD, DEL and CHECK begin: the trace, the key check, then for DEL and CHECK the lock and the record
//	add.go            ADD: one durable write before each delegate, rollback in reverse on failure
//	teardown.go       DEL and the teardown that rollback, DEL, GC and the retries share; a corrupt record quarantined
//	verbs.go          CHECK, STATUS and GC as the runtime calls them
//	gc.go             CollectGarbage: records the runtime no longer lists torn down, GC forwarded with a widened valid list
//	gcalive.go        what keeps a record GC would tear down: its ADD's netns still holds a process, nothing can tell, or an empty list and no proof
//	procscan.go       ProcScanner: which network namespaces hold a process, seen through /proc (GC and the node reconciler)
//	barrier.go        the network barrier an ADD holds shared and a GC exclusive (cache.Barrier)
//	gate.go           the stdin gate: a delegate gets its request only once its record is durable
//	norecord.go       a DEL without a record: a tombstone's key left alone, the primary's attachment adopted, else, handed an ADD's result and no live record holding its addresses, every delegate DELed best-effort
//	tombstone.go      the tombstone a teardown outside the runtime's DEL leaves, so that a stale DEL invokes nothing; the addresses of results
//	orphan.go         a DEL without a record tears down what the primary made (OrphanFinder)
//	reclaim.go        Reclaim: the node reconciler's teardown of one attachment whose sandbox is gone
//	repair.go         Repair and Abandon, for catenactl repair
//	backoff.go        when a failed teardown is due again, noted in the store's teardown index
//	retrypass.go      KickRetry and RetryPending: pending teardowns retried outside the runtime's call
//	retrier_proc.go   ProcKicker: the detached catena --retry-pending process, its config in a memfd and its lock inherited
//	config.go         NetConf and Delegate: Catena's network config, parsed and checked
//	conffile.go       LoadConfFile and CatenaConf: Catena's config from a .conf or a .conflist, for tools
//	auto.go           cniVersion "auto": a delegate's version negotiated from its VERSION answer
//	auto_probe.go     CachedProber: VERSION answers kept in the cache dir by binary identity
//	result.go         results converted between CNI versions; prevResult handed on
//	errors.go         CNI error codes of the engine's errors; delegateError
//	netns.go          network namespace identity: every teardown passes its netns only while it is the ADD's
//	netns_holds.go    NetNSHolds: whether a namespace's ifname holds an address, the proof a DEL with no record passes its netns on
//	oplog.go          the trace of every operation (journal.Op): its span and each call's, the runtime's trace context continued (WithTrace); logged, and passed to OnOp
//	logging.go        NewLogger: JSON lines to the config's logFile, else text on stderr; never stdout
//	executor.go       Executor: what the engine needs of whatever runs its delegates
//	bound.go          MaxText and BoundText: every text a delegate controls, bounded
package libchain
