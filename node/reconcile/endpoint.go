package reconcile

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// The CRI sockets containerd and CRI-O listen on unless configured
// otherwise.
const (
	ContainerdEndpoint = "unix:///run/containerd/containerd.sock"
	CRIOEndpoint       = "unix:///var/run/crio/crio.sock"
)

// DefaultEndpoints are the runtimes' default sockets in the order crictl
// tries them: containerd's, then CRI-O's.
func DefaultEndpoints() []string {
	return []string{ContainerdEndpoint, CRIOEndpoint}
}

// EndpointChoice is the runtime endpoint FindEndpoint chose, and why.
type EndpointChoice struct {
	// Endpoint is the first candidate whose socket exists; with none, the
	// first candidate.
	Endpoint string
	// Found is false when no candidate's socket exists.
	Found bool
	// Passed says why each candidate before Endpoint (every one, when
	// none was found) was not taken.
	Passed []string
}

// FindEndpoint returns the first of candidates (socket paths or unix://
// URLs) that is a unix socket now, as crictl picks the runtime of a node.
func FindEndpoint(candidates []string) EndpointChoice {
	var c EndpointChoice
	for _, e := range candidates {
		err := isSocket(strings.TrimPrefix(e, "unix://"))
		if err == nil {
			c.Endpoint, c.Found = e, true
			return c
		}
		c.Passed = append(c.Passed, fmt.Sprintf("%s: %v", e, err))
	}
	if len(candidates) > 0 {
		c.Endpoint = candidates[0]
	}
	return c
}

// isSocket is nil when path is a unix socket (through symlinks).
func isSocket(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("not a socket (%s)", fi.Mode().Type())
	}
	return nil
}
