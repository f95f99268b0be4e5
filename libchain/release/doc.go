// Package release names this build of Catena: Version, written here and
// nowhere else, and the commit the binary was built from, which the Go
// toolchain records in a binary built in a git checkout (vcs.revision and
// vcs.modified of its build info; go build does unless -buildvcs=false).
// catena, catenactl and catena-agent print String.
//
// Files:
//
//	doc.go      this comment
//	release.go  Version, Commit and String
package release
