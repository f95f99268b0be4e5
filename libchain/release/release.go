package release

import "runtime/debug"

// Version is Catena's version, one for all its binaries.
const Version = "v0.1.0"

// Unknown is the commit of a binary whose build info names none: built
// outside a git checkout, with -buildvcs=false, or a test binary.
const Unknown = "unknown"

// shortCommit is how many characters of the revision are shown, as git's
// abbreviated hashes are long enough to be unique in the repository.
const shortCommit = 12

// Commit renders the commit that info records: the first 12 characters of
// vcs.revision, followed by ", modified" when vcs.modified is true (the
// work tree had changes not committed); Unknown when info is nil or
// records no revision.
func Commit(info *debug.BuildInfo) string {
	if info == nil {
		return Unknown
	}
	var revision string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return Unknown
	}
	if len(revision) > shortCommit {
		revision = revision[:shortCommit]
	}
	if modified {
		return revision + ", modified"
	}
	return revision
}

// Describe is Version with the commit info records:
// "v0.1.0 (commit 1a2b3c4d5e6f, modified)", "v0.1.0 (commit unknown)".
func Describe(info *debug.BuildInfo) string {
	return Version + " (commit " + Commit(info) + ")"
}

// String describes the running binary: Describe of its own build info.
func String() string {
	info, _ := debug.ReadBuildInfo() // nil when the binary has none
	return Describe(info)
}
