// Package reconcile is Catena's node reconciler, shared by catena-agent run
// and catenactl reconcile: it reclaims the attachments whose sandbox the
// runtime forgot (a wiped runtime, a teardown it gave up on), and never one
// still being created or still running, and it retries the teardowns that
// need it.
//
// The protocol (docs/reconciler.md has the reasons):
//  1. Scope: only records whose CNI_ARGS carry K8S_POD_INFRA_CONTAINER_ID
//     equal to their container ID.
//  2. Order: the records are read first, then ListPodSandbox is called.
//  3. Alive: a sandbox listed in any state; or, whatever the runtime
//     lists, a record whose netns proves its sandbox runs (a process is
//     in the namespace of its ADD; where not every process can be seen,
//     the file at its netns path is still that namespace). Its mark is
//     cleared.
//  4. Never a candidate: a record whose lock is held, or which changed
//     within the grace period.
//  5. Doubt: an empty sandbox list proves nothing (a wrong endpoint, a
//     runtime not yet restored): while it is empty, only a record whose
//     netns proves its sandbox gone (no process in the namespace of its
//     ADD, and the file at its path gone or another namespace) is a
//     candidate; the others are kept, and so are their marks. A file
//     still that namespace with no process in it is no proof: a pinned
//     namespace outlives its processes (CRI-O's drop_infra_ctr pods have
//     none while their containers wait to restart). Records with no
//     netns or no recorded identity get no proof.
//  6. Two phases: a candidate is marked durably (time and record version);
//     a later pass, at least grace after the mark, reclaims it only if a
//     fresh ListPodSandbox still lacks it (and, if empty, its netns still
//     proves it gone), its netns does not show it alive, its lock is taken
//     without waiting and the record is still the marked version.
//     Anything else clears the mark.
//  7. Reclaim: a teardown as GC does it (libchain.Engine.Reclaim).
//  8. Errors mean keep: if the runtime fails or is slow, or a record
//     cannot be read, nothing is reclaimed in that pass.
//  9. A record that needs teardown is retried whatever the runtime says,
//     with per-record capped exponential backoff, and optionally its
//     failing delegates are abandoned after AbandonAfter.
//
// Files:
//
//	doc.go           this comment
//	reconciler.go    Reconciler, Options and one Pass: the records read, then the runtime's list, each record decided
//	phase2.go        phase two: the marked records reclaimed once grace has passed, if nothing speaks for them
//	doubt.go         the netns evidence of a record the runtime does not list, and the doubt of an empty list
//	netns.go         NetNSObserver, Verdict and Evidence: what a record's netns says of its sandbox
//	procnetns.go     ProcNetNS: the node's network namespaces, stated and scanned through /proc (libchain.ProcScanner)
//	retry.go         the teardowns that need it retried, oldest due first, a bounded number at a time
//	backoff.go       Backoff and DueTimer: when a record's teardown is due again
//	indexbackoff.go  IndexBackoff: that backoff read from the engine's pending-teardown markers
//	scope.go         InScope: only records a CRI runtime made
//	lister.go        SandboxLister and CRILister: the runtime's pod sandboxes and its Version over CRI
//	endpoint.go      DefaultEndpoints and ProbeEndpoints (which sockets answer CRI)
//	autoendpoint.go  ChooseEndpoint: the runtime kubelet uses among the sockets found, or a refusal to guess
//	kubelet.go       FindKubelet: kubelet's runtime endpoint, from its command line or its config file
//	report.go        Report, Decision and Action: what a pass did and why; Observer
//	loop.go          Loop: a pass every Interval; it holds the cache dir's retrier lock once it can take it
//	node.go          NodeConfig and NewNode: a Reconciler wired to a node's cache dir, runtime and delegates
package reconcile
