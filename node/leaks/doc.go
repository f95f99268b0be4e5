// Package leaks finds what a node's networks hold that no live sandbox
// owns, and releases it by its owner: the IPs, portmap chains and cache
// entries leaked before Catena was installed, or outside any of its
// records (a plain chain whose DEL stopped at a failing plugin leaks one
// host-local reservation per retry).
//
// A Scanner looks at the node once and writes a Report: every host-local
// reservation of every network of the conf dir (a file named by the IP in
// the range's data dir, holding its owner's container ID and ifname), every
// portmap DNAT chain (by the owner its rules' comment names), flannel's
// scratch files (one per container, released with the reservation its
// delegate made by flannel's own DEL), the veths on the networks' bridges
// whose peer is in a namespace no process is in and no mount holds, the
// runtime's libcni cache entries and Catena's records, each a Finding with
// its owner, its evidence, its age and its verdict. A finding is a Leak
// only when all of these agree: the runtime listed its sandboxes (a list
// that failed or came back empty proves nothing), its owner's is not among
// them, Catena has no record of the owner and does not hold its lock, its
// address is on no interface of any live network namespace (one a process
// is in, one mounted under /run/netns, one only an open fd holds), a
// delegate of the network's config made it, and it is older than MinAge.
// When the owner has a libcni cache entry, the network's config is the one
// the entry holds (what its ADD ran with: the data dirs it names are read
// too), and its release DELs with that config. Anything else keeps it,
// with the first doubt as the reason; Catena's own records are always kept
// (its reconciler tears them down by the record), and so are the runtime's
// cache entries (its files) and the veths (no DEL removes one without its
// namespace; it goes with the namespace).
//
// A release needs two reports, taken at least DefaultConfirmAfter apart
// on this node and this boot, and a fresh look: Confirm keeps only what is
// a leak in every one of them, with the same owner and delegate. A
// Releaser then, for each owner and delegate, takes Catena's lock of the
// owner's attachment, checks that each finding is still as the reports
// saw it (the reservation's file still names the owner, the chain's rule
// is still there), and runs that delegate's DEL with the owner's cached
// config or the network's config as the conf dir has it, the owner's
// container ID and ifname and no
// CNI_NETNS: host-local frees that owner's reservation, portmap removes
// that owner's chain. It removes no file, address or rule itself, and
// checks after the DEL that what it released is gone. Each release is one
// RELEASE operation in Catena's event journal.
//
// The report is JSON, version ReportVersion:
//
//	{"version":1, "node":"<hostname>", "bootID":"<boot_id>", "time":"<RFC 3339>",
//	 "minAgeNs":<ns>,
//	 "inputs":[{"what":"sandboxes","where":"<endpoint>","count":N,"error":"..."}, ...],
//	 "findings":[{"kind":"host-local|portmap|flannel|veth|libcni-cache|catena-record",
//	   "owner":{"network":"...","containerID":"...","ifname":"..."},
//	   "item":"<IP, chain, file or key>", "evidence":"<file or rule>",
//	   "since":"<RFC 3339>", "delegate":{"index":0,"type":"bridge"},
//	   "cachedConfig":"<the owner's libcni cache entry, if any>",
//	   "verdict":"leak|keep", "why":"..."}, ...]}
//
// Files:
//
//	doc.go        this comment
//	report.go     Report, Finding, Owner, Delegate; ReadReport
//	config.go     the networks of the conf dir, their host-local data dirs and delegates
//	scan.go       Scanner: the findings and their verdicts
//	cached.go     the config of an owner's libcni cache entry, and its delegates
//	live.go       LiveNamespaces: the addresses and IDs of every live network namespace; BridgeVeths
//	veths.go      the veths whose peer's namespace nothing visible holds
//	onnode.go     OnNode: the Scanner and Releaser of this node, catenactl's and the agent's
//	confirm.go    Confirm: what every report and a fresh look agree on
//	release.go    Releaser: the owner's delegate's DEL, under Catena's lock
//	watch.go      Watcher: the agent's scan every interval, its metrics, its releases
package leaks
