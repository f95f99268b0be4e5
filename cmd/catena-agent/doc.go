// Command catena-agent installs Catena on a node and keeps it installed: it
// wraps the node's primary CNI config in a generated conflist that runs it
// through Catena, copies Catena's binaries into the CNI bin dir, and, as
// `run`, the DaemonSet's command, also reconciles the node's records, records
// Kubernetes Events and serves health checks and metrics. See
// `catena-agent --help`.
//
// Files:
//
//	doc.go        this comment
//	main.go       main: run with the process's stdio, filesystem and environment
//	root.go       the root command, the flags install and run share, flags from CATENA_AGENT_* variables
//	install.go    install: the install kept current until a signal, or with --once one pass
//	run.go        run: the install kept current, health checks, the HTTP server and the other components
//	reconcile.go  run's node reconciler and /metrics
//	events.go     run's Kubernetes Events, and the in-cluster client config
//	secure.go     run's authenticated HTTPS /metrics
//	traces.go     run's trace export, from the OTEL_* variables
//	leaks.go      run's leak scan: catena_leaks, the Node's Warning, --release-leaks-after
//	memlimit.go   run's Go soft memory limit, from the container's limit (--memory-limit)
//	selfwatch.go  run's watch of its own DaemonSet (--uninstall-on-delete): the conflist removed at an uninstall
//	adopt.go      the adopter each pass runs over the runtime's libcni cache
//	uninstall.go  uninstall: the generated file and the binaries removed under the interlock
package main
