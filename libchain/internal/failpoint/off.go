//go:build !failpoint

package libchain

// hit marks a crash point. Without the failpoint build tag it does nothing
// and compiles away; see failpoint_on.go.
func hit(string) {}
