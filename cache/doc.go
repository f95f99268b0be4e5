// Package cache is Catena's durable per-attachment record store.
//
// Every attachment (network name, container ID, ifname) has at most one
// record. The record says, at every instant, what each delegate of the chain
// really did, so that a failed ADD can be rolled back and a later DEL can tear
// down exactly what is still held, with the configuration cached at ADD time.
//
// # The cache dir
//
// Everything lives under one cache dir (cacheDir, default
// /var/lib/cni/catena). Dirs are 0700 and files 0600, owned by Catena's
// user and reached without following a symlink (package fileutil's
// TrustedFs and checks);
// <name> is "<containerID>:<ifname>", or "h-<sha256>" for a key too long
// for a file name, and <network> "h:<sha256>" for a network name too long
// (names.go):
//
//	records/<network>/<name>.json           a record: a short file of self-checking entries (recordfile.go, codec.go, delta.go)
//	records/<network>/.<name>.json.tmp      the temp file of a durable replace, swept once stale (sweep.go)
//	locks/<network>/<name>.lock             an attachment's flock, unlinked by its holder (flock.go)
//	locks/<network>/.barrier                the network's GC/ADD barrier, flock shared or exclusive (barrier_flock.go)
//	pending/<network>/<name>                a pending-teardown marker: when it is due, how many attempts failed (pending.go, pending_note.go)
//	pending/<network>/.due                  the network's retry stamp (pending_stamp.go)
//	retrier.lock                            held by whoever runs the retries outside the runtime's calls (retrier.go)
//	reconcile/<network>/<name>.json         the node reconciler's marks (marks.go)
//	tombstones/<network>/<name>.json        an attachment torn down outside the runtime's DEL (tombstone.go), cleared by its runtime's next DEL, pruned by GC
//	quarantine/<network>_<name>.<unixnano>.json   a corrupt record moved aside (quarantine.go), pruned by GC (quarantine_prune.go)
//	quarantine/<network>.<unixnano>         a whole records/<network> that could not be trusted
//	versions/<hash of the binary's path>.json     a delegate binary's VERSION answer (versions.go)
//	events/events.jsonl, events.jsonl.1     the event journal, written and read by the engine, not by this package
//
// Records, marks and tombstones are state: written durably (fileutil's
// durable writes, recordfile.go).
// Markers, stamps and the version cache are hints: a missing or torn one
// costs work, never correctness. A lock file says who holds it and for
// which key; the flock is the lock.
//
// # The Store and its capabilities
//
// A Store (store.go) is a Locker plus Load, Save, Remove, Quarantine, List
// and SweepTemps. DiskStore is the one on disk; MemLocker serves the tests.
// ExampleDiskStore (example_test.go) shows a record's life in it.
// A Store may also implement, and the engine asks for each by a type
// assertion, doing without when it is missing:
//
//	Barrier            orders GC against ADD per network (barrier.go; on a DiskStore, through its FlockLocker)
//	TeardownIndex      lists the records needing teardown and when each is due (pending.go)
//	RetryScheduler     says whether a retry pass may be due without reading a marker (pending_stamp.go)
//	Prober             a health check of the storage, for STATUS (probe.go)
//	QuarantinePruner   bounds what quarantine/ keeps (quarantine_prune.go)
//	Tombstones         the tombstones of attachments torn down outside the runtime's DEL (tombstone.go)
//
// The reconciler's marks are a store of their own, MarkStore (DiskMarks).
//
// # Files
//
//	doc.go              this comment: the cache dir's layout, the Store's capabilities
//	store.go            Store, Locker, Unlocker, Holder, the sentinel errors
//	record.go           Record, Key, Step, phases and step states
//	codec.go            a record's on-disk envelope: schema, sha256, Encode and Decode
//	envelope.go         the canonical envelope taken apart by its fixed layout, before the general decode
//	delta.go            entries that hold only the steps that changed
//	recordfile.go       a record file as a sequence of entries; reading it back
//	recordfile_slot.go  preallocated record files: entries written in place over zeros
//	recordfile_memo.go  what a DiskStore remembers of its last write, to write a delta
//	disk.go             DiskStore: Load, Save, Remove, the paths of records
//	list.go             DiskStore.List: every record's key, from its name or its content
//	quarantine.go       DiskStore.Quarantine: a corrupt record moved aside
//	quarantine_prune.go QuarantinePruner: quarantine/ bounded by age and count
//	sweep.go            SweepTemps: the temp files crashes left
//	names.go            file names of keys and networks, hashed when too long
//	entrycheck.go       record entry checks, bounded reads, the modes the store creates
//	flock.go            FlockLocker: per-attachment flock(2) lock files (linux)
//	lockprobe.go        ProbeLock: whether a lock file's flock is held, taking no part in it
//	memlock.go          MemLocker: an in-process Locker for tests
//	barrier.go          Barrier: DiskStore's, through its Locker, and MemLocker's
//	barrier_flock.go    FlockLocker's Barrier on locks/<network>/.barrier (linux)
//	pending.go          TeardownIndex: pending-teardown markers
//	pending_note.go     PendingNote, a marker's content, encoded and decoded
//	pending_of.go       DiskStore.PendingNoteOf: one key's marker
//	pending_stamp.go    RetryScheduler: a network's retry stamp
//	retrier.go          the cache dir's retrier lock (linux)
//	marks.go            MarkStore and DiskMarks: the reconciler's marks
//	probe.go            Prober: the store's health check and audit
//	versions.go         VersionCache: delegates' VERSION answers by binary identity
//	tombstone.go        Tombstones: Bury, TombstoneOf, Unbury, PruneTombstones
//
// cache/faultfs has the fault-injecting and crash-modelling filesystems
// the durability tests run on.
package cache
