// Package integration runs Catena with the real reference plugins in real
// network namespaces. It needs root; under CI=true a missing prerequisite
// fails the run instead of skipping it.
//
// It holds only tests; make test-integration runs them, make test-k8s
// TestKubernetesNode. Files, by prefix:
//
//	doc.go                 this comment
//	env_, net_, ping_, conc_   TestMain (catena and the test plugins built, the reference plugins linked),
//	                       requireRoot, each test's private world (netns, bridge, subnet, cache dirs), shared helpers
//	chain_, cnitool_, gocni_, isolation_, soak_, versions_, auto_, longid_, lock_, trust_
//	                       a real chain through catena: ADD, CHECK, DEL, concurrency, versions, locks, trust
//	crash_                 catena killed at every crash point of a failpoint build, and recovery
//	gc_, retrier_, netns_identity_   GC, the detached retrier, a new namespace at a reused netns path
//	stale_                 a stale DEL of a torn-down attachment after its address went to another pod
//	catenactl_             catenactl over a real chain's records
//	agent_, netdir_, cilium_exclusive_   catena-agent install, run and uninstall over a real conf dir
//	calico_, flannel_      Calico-shaped and flannel primaries
//	cri_, image_           containerd's CRI and the node image
//	crio_                  a private CRI-O per test (crio_harness_test.go; testdata/runcwrap): the seed
//	                       failure, GC, STATUS and CHECK, hostPorts, restarts; bin/crio from `make crio`
//	reconcile_             the node reconciler against a real runtime
//	readme_                the README's shell blocks run
//	jaeger_                a private Jaeger v2 (bin/tools/jaeger from `make jaeger`) and its query API, for traces
//	leaks_                 leaks a plain chain made before Catena: catenactl leaks and repair --from-report on containerd
//	trace_                 the agent's trace export into Jaeger: a libcni runtime's traced pods, and the collector's faults
//	k8s_                   TestKubernetesNode: a real single-node cluster, its scenarios and the chaos soak
//	                       (k8s_soak_owner_: its owner check over the spy's log, and that check's tests)
package integration
