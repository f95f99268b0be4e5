// Package layers holds no code: its test checks that the module's imports
// point down its layers, lowest first:
//
//	fileutil (trusted and durable files)
//	cache (the record store) and deploy (the manifests)
//	libchain and libchain/... (the engine)
//	node/... (what the DaemonSet runs)
//	cmd/..., plugins/..., tools/... (the binaries)
//
// A package imports only from its own layer or a lower one. On top of that:
// plugins/... (the CNI binaries) link nothing above the engine, never
// k8s.io/client-go, and no go.opentelemetry.io package but those CNI's
// pkg/invoke imports (OpenTelemetry's API, never its SDK or an exporter:
// catena carries the trace context itself, libchain/tracectx);
// internal/... and integration/... are test helpers that only tests
// import. Test files are not checked: they are not linked into any
// binary. A package of the module that no layer covers fails the test
// too: a new directory gets a place in layers_test.go's table.
//
// Files:
//
//	doc.go          this comment
//	layers_test.go  the layer table, the rules and the test that runs them over `go list -json ./...`
package layers
