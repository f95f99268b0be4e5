package reconcile

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
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

// EndpointChoice is the runtime endpoint ChooseEndpoint chose, and why.
type EndpointChoice struct {
	// Endpoint is the chosen candidate; with none found, the first.
	Endpoint string
	// Found is false when no candidate's socket exists.
	Found bool
	// Passed says why each candidate that is not a socket was not taken.
	Passed []string
	// From says why ChooseEndpoint took Endpoint.
	From string
}

// ProbeTimeout bounds the CRI Version call of each socket ProbeEndpoints
// asks.
const ProbeTimeout = 3 * time.Second

// ProbeEndpoints finds which of candidates are unix sockets now, and asks
// each its CRI Version within ProbeTimeout: the Sockets and Passed of
// ChooseEndpoint's facts.
func ProbeEndpoints(ctx context.Context, candidates []string) EndpointFacts {
	var f EndpointFacts
	for _, e := range candidates {
		if err := isSocket(strings.TrimPrefix(e, "unix://")); err != nil {
			f.Passed = append(f.Passed, fmt.Sprintf("%s: %v", e, err))
			continue
		}
		s := RuntimeSocket{Endpoint: e}
		if v, err := probeRuntime(ctx, e); err != nil {
			s.Err = err.Error()
		} else {
			s.Runtime = v
		}
		f.Sockets = append(f.Sockets, s)
	}
	return f
}

// probeRuntime asks the runtime at endpoint its CRI Version.
func probeRuntime(ctx context.Context, endpoint string) (string, error) {
	l, err := DialCRI(endpoint)
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	return l.Runtime(ctx)
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

// AutoSources are where ResolveAuto learns which runtime kubelet uses;
// a nil one is not known.
type AutoSources struct {
	// Kubelet finds the node's kubelet (FindKubelet).
	Kubelet func() (Kubelet, error)
	// NodeRuntime is the Node's status.nodeInfo.containerRuntimeVersion.
	NodeRuntime func(ctx context.Context) (string, error)
}

// ResolveAuto is --runtime-endpoint auto: it probes candidates
// (ProbeEndpoints), asks src which runtime kubelet uses and chooses
// (ChooseEndpoint). unknown says what src could not tell, and why.
func ResolveAuto(ctx context.Context, candidates []string, src AutoSources) (c EndpointChoice, unknown []string, err error) {
	f := ProbeEndpoints(ctx, candidates)
	if src.Kubelet == nil {
		unknown = append(unknown, "kubelet's endpoint: not looked for")
	} else if k, err := src.Kubelet(); err != nil {
		unknown = append(unknown, "kubelet's endpoint: "+err.Error())
	} else if err := k.Mark(&f); err != nil {
		unknown = append(unknown, err.Error())
	}
	if src.NodeRuntime == nil {
		unknown = append(unknown, "the Node's runtime: not asked")
	} else if v, err := src.NodeRuntime(ctx); err != nil {
		unknown = append(unknown, "the Node's runtime: "+err.Error())
	} else {
		f.NodeRuntime = v
	}
	c, err = ChooseEndpoint(candidates, f)
	if err != nil && len(unknown) > 0 {
		err = fmt.Errorf("%w (unknown: %s)", err, strings.Join(unknown, "; "))
	}
	return c, unknown, err
}
