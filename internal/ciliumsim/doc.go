// Package ciliumsim does to a CNI conf dir what Cilium's agent does with
// cni.exclusive: true (its default), for tests: its config manager writes
// its own conflist, then its cleanupOtherCNI renames every other .conf,
// .conflist and .json file of the dir to <name>.cilium_bak; it does both at
// start and again after every fsnotify event in the dir (its
// watchForDirectoryChanges triggers the controller that runs them).
//
// Files:
//
//	doc.go        this comment
//	ciliumsim.go  the simulated Cilium agent: its conflist written, every other config renamed to .cilium_bak, at start and on every event
package ciliumsim
