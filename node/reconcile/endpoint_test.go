package reconcile

import (
	"net"
	"os"
	"path/filepath"
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

// TestFindEndpoint: the first candidate that is a socket now wins, as a
// path or a unix:// URL, through a symlink (/var/run -> /run); a missing
// path, a dir (a hostPath mount made by DirectoryOrCreate) and a regular
// file are passed over, each with its reason; with none, the first
// candidate, not found.
func TestFindEndpoint(t *testing.T) {
	dir := t.TempDir()
	containerd, crio := filepath.Join(dir, "containerd.sock"), filepath.Join(dir, "crio.sock")
	listenUnix(t, containerd)
	listenUnix(t, crio)
	missing, emptyDir, file := filepath.Join(dir, "missing.sock"), filepath.Join(dir, "dir"), filepath.Join(dir, "file")
	require.NoError(t, os.Mkdir(emptyDir, 0o755))
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	link := filepath.Join(dir, "link.sock")
	require.NoError(t, os.Symlink(crio, link))

	cases := []struct {
		name       string
		candidates []string
		want       EndpointChoice
	}{
		{"both: containerd's first", []string{"unix://" + containerd, "unix://" + crio},
			EndpointChoice{Endpoint: "unix://" + containerd, Found: true}},
		{"only CRI-O's", []string{"unix://" + missing, "unix://" + crio},
			EndpointChoice{Endpoint: "unix://" + crio, Found: true, Passed: []string{"unix://" + missing + ": stat " + missing + ": no such file or directory"}}},
		{"a dir and a file are not sockets", []string{emptyDir, file, crio},
			EndpointChoice{Endpoint: crio, Found: true, Passed: []string{emptyDir + ": not a socket (d---------)", file + ": not a socket (----------)"}}},
		{"through a symlink", []string{"unix://" + link},
			EndpointChoice{Endpoint: "unix://" + link, Found: true}},
		{"none: the first", []string{"unix://" + missing, emptyDir},
			EndpointChoice{Endpoint: "unix://" + missing, Passed: []string{"unix://" + missing + ": stat " + missing + ": no such file or directory", emptyDir + ": not a socket (d---------)"}}},
		{"no candidates", nil, EndpointChoice{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, FindEndpoint(tc.candidates))
		})
	}
}

// TestDefaultEndpoints: containerd's, then CRI-O's, each a unix:// URL of
// its default socket; a fresh slice each call.
func TestDefaultEndpoints(t *testing.T) {
	assert.Equal(t, []string{"unix:///run/containerd/containerd.sock", "unix:///var/run/crio/crio.sock"}, DefaultEndpoints())
	DefaultEndpoints()[0] = "changed"
	assert.Equal(t, ContainerdEndpoint, DefaultEndpoints()[0])
}
