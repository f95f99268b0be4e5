// Package libchain is Catena's chain engine: it runs a chain of delegate CNI
// plugins and keeps a durable record of what each one really did, so that a
// failed ADD is rolled back exactly and a DEL tears down only what is held.
//
// The engine is pure logic over two small interfaces: an Executor (built on
// the CNI invoke package) and a cache.Store.
//
// Files:
//
//	doc.go            this comment
//	engine.go         Engine and Request: the attachment's lock, the record's writes, the clock and the log
//	add.go            ADD: one durable write before each delegate, rollback in reverse on failure
//	teardown.go       DEL and the teardown that rollback, DEL, GC and the retries share; a corrupt record quarantined
//	verbs.go          CHECK, STATUS and GC as the runtime calls them
//	gc.go             CollectGarbage: records the runtime no longer lists torn down, GC forwarded with a widened valid list
//	barrier.go        the network barrier an ADD holds shared and a GC exclusive (cache.Barrier)
//	gate.go           the stdin gate: a delegate gets its request only once its record is durable
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
//	netns.go          network namespace identity: a teardown no runtime asked for passes a netns only while it is the ADD's
//	oplog.go          Op: the summary of every operation, logged and passed to OnOp; its trace of calls and waits
//	logging.go        NewLogger: JSON lines to the config's logFile, else text on stderr; never stdout
//	readfile.go       ReadSmallFile and OpenRegular: bounded reads that can refuse a symlink
//	failpoint_on.go   crash points that kill the process, built with -tags failpoint
//	failpoint_off.go  the crash points of an ordinary build: nothing
package libchain
