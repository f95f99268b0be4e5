package reconcile

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listenUnix makes a unix socket at path, closed at cleanup.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
}

// TestDefaultEndpoints: containerd's, then CRI-O's, each a unix:// URL of
// its default socket; a fresh slice each call.
func TestDefaultEndpoints(t *testing.T) {
	assert.Equal(t, []string{"unix:///run/containerd/containerd.sock", "unix:///var/run/crio/crio.sock"}, DefaultEndpoints())
	DefaultEndpoints()[0] = "changed"
	assert.Equal(t, ContainerdEndpoint, DefaultEndpoints()[0])
}
