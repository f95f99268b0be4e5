package release

import (
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCommit(t *testing.T) {
	const rev = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	settings := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "unknown"},
		{"built outside a checkout", settings("-trimpath", "true", "CGO_ENABLED", "0"), "unknown"},
		{"clean checkout", settings("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-27T12:00:00Z", "vcs.modified", "false"), "1a2b3c4d5e6f"},
		{"changes not committed", settings("vcs.revision", rev, "vcs.modified", "true"), "1a2b3c4d5e6f, modified"},
		{"modified before revision", settings("vcs.modified", "true", "vcs.revision", rev), "1a2b3c4d5e6f, modified"},
		{"a short revision is kept whole", settings("vcs.revision", "abc123"), "abc123"},
		{"modified but no revision", settings("vcs.modified", "true"), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Commit(tt.info))
			assert.Equal(t, "v0.1.0 (commit "+tt.want+")", Describe(tt.info))
		})
	}
}

// TestVersionIsSemver: Version is a v-prefixed semantic version, as Go
// modules and the changelog write it.
func TestVersionIsSemver(t *testing.T) {
	assert.Regexp(t, regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`), Version)
}

// TestString: the running binary's String is Version and a commit field,
// whatever its build info (a test binary's names no commit).
func TestString(t *testing.T) {
	assert.Regexp(t, `^`+regexp.QuoteMeta(Version)+` \(commit ([0-9a-f]{1,12}(, modified)?|unknown)\)$`, String())
}
