// Command catena is a chained CNI meta-plugin: it runs its delegates itself
// and durably records what each one did, so that a failed ADD is rolled back
// exactly and a DEL never wedges. All logic lives in libchain and cache.
//
// Files:
//
//	doc.go      this comment
//	main.go     main: the CNI verbs through skel, each one engine call wired to the disk store, the executor and the journal, continuing the runtime's trace context; the about line with the version
//	retrier.go  the detached retry pass (catena --retry-pending) that libchain.ProcKicker starts
//	runtime.go  the Go runtime sized for one CNI call: one P, no GC below 64 MiB
package main
