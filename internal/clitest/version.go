package clitest

import (
	"regexp"

	"github.com/catena-cni/catena/libchain/release"
)

// VersionLine matches the line a Catena binary named name prints for its
// version: "catenactl v0.1.0 (commit 1a2b3c4d5e6f)", with ", modified"
// after the commit of a work tree that had changes, or "(commit unknown)"
// for a binary whose build names no commit (a test binary's).
func VersionLine(name string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(name+" "+release.Version) + ` \(commit ([0-9a-f]{12}(, modified)?|unknown)\)$`)
}
