// Package adopt gives Catena a record for every attachment that the node's
// primary CNI made and Catena has no record of, so that the runtime's later
// DEL, which then reaches Catena, still tears it down.
//
// The source is the runtime's libcni cache: after every ADD, libcni (and so
// containerd's go-cni) writes <resultsDir>/<network>-<containerID>-<ifname>,
// holding the conflist used, the runtime's arguments and the final result.
// Entries keep appearing after Catena's file is installed (an ADD that
// started before the runtime reloaded its config finishes through the
// primary), so an Adopter runs on every pass of the agent, and remembers the
// entries it has settled so that a pass reads only what is new. An entry
// whose DEL comes before the next pass is adopted by that DEL itself
// (libcnientry.AtDel, which catena runs when its config names the results
// dir). Reading, vetting and rendering one entry is package
// libchain/libcnientry's; this package is the agent's pass over the dir.
//
// Files:
//
//	doc.go    this comment
//	adopt.go  Options, Report, the Adopter and one pass: an entry read, recorded under its attachment's lock, confirmed against a racing DEL
//	scan.go   the listing of the results dir: what is new, what is another network's, what is refused
package adopt
