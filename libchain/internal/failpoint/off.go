//go:build !failpoint

package failpoint

// Hit marks a crash point. Without the failpoint build tag it does nothing
// and compiles away; see on.go.
func Hit(string) {}
