// Package fakecri is a CRI runtime service for tests: it answers
// ListPodSandbox from a set of IDs and Version with a runtime name over a
// real gRPC unix socket, and refuses every other call.
//
// Files:
//
//	doc.go      this comment
//	fakecri.go  Server: ListPodSandbox answered from a set of IDs, and Version, on a unix socket
package fakecri
