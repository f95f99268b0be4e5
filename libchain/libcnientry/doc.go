// Package libcnientry reads the runtime's libcni cache entries under
// Catena's trust rules and renders each as the record a Catena ADD would
// have left, so that a DEL through Catena tears down an attachment that the
// node's primary CNI made.
//
// After every ADD, libcni (and so containerd's go-cni) writes
// <resultsDir>/<network>-<containerID>-<ifname>, holding the conflist
// used, the runtime's arguments and the final result. An entry is read
// only from a results dir that Catena's euid owns and group and others
// cannot write, only if it is a regular file of Catena's euid that they
// cannot write either, of at most MaxSize bytes; it is adopted only if it
// is of the expected network, named after its own content, holds a result,
// names plain delegate binaries and was not made through Catena itself.
//
// AtDel is the DEL path's use (the catena plugin's, when its config names
// libcniResultsDir): a DEL that finds no record adopts the entry of exactly
// its attachment. The agent's adoption passes over the whole dir (package
// node/adopt) use Vet, Read and Record.
//
// Files:
//
//	doc.go     this comment
//	entry.go   one cache file: its identity (FileID), the checks before and while it is read (Vet, Read), its parse
//	record.go  the record a Catena ADD would have left (Record)
//	atdel.go   AtDel, the libchain.OrphanFinder of a DEL that finds no record
package libcnientry
