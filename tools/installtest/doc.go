// Package installtest holds no code: its tests run the scripts of scripts/
// as a user would, the install scripts with a private output dir, Go module
// cache and module proxy, and never touch the repo's bin/.
//
// Files:
//
//	doc.go               this comment
//	run_test.go          runs a script in its own process group, bounded in time; versions.env's pins
//	flannel_test.go      install-flannel.sh: built from a module proxy, and the message when it has no source
//	crio_test.go         install-crio.sh: the message when it has no source
//	failedtests_test.go  failed-tests.sh: each failed test's own lines from a go test -v log
//	treesum_test.go      lib.sh's pinned-source sum: a checkout with symlinks and a copy of their text agree; vendor-src keeps its pins
package installtest
