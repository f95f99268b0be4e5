// Package agent is the frame of catena-agent run: components that run until
// the context ends (the installer's watch loop, the HTTP server, the node
// reconciler, the Kubernetes Events watcher) and readiness and liveness
// checks served over HTTP on one mux that any component may register
// handlers on (/metrics).
//
// Files:
//
//	doc.go       this comment
//	runnable.go  Runnable, Named and RunAll: the components run together, the first failure ending them all
//	health.go    Health and Check: /healthz and /readyz from the checks components register
//	server.go    Server: the HTTP server, bounded and shut down with the context
//	limits.go    the listener that holds at most n connections at once
package agent
