package reconcile

import (
	"fmt"
	"path/filepath"
	"strings"
)

// RuntimeSocket is one candidate socket of --runtime-endpoint auto, as the
// probe found it.
type RuntimeSocket struct {
	// Endpoint is the candidate, a socket path or unix:// URL.
	Endpoint string
	// Runtime is what its CRI Version answered, as kubelet shows it in
	// the Node's status.nodeInfo.containerRuntimeVersion
	// ("containerd://2.4.0", "cri-o://1.34.11"); "" if it did not answer.
	Runtime string
	// Err is why it did not answer ("" if it did).
	Err string
	// Kubelet: kubelet's endpoint is this socket (Kubelet.Mark).
	Kubelet bool
}

// EndpointFacts is what ChooseEndpoint decides from: what the node's
// sockets answered, and what says which runtime kubelet uses.
type EndpointFacts struct {
	// Sockets are the candidates that are unix sockets, in order.
	Sockets []RuntimeSocket
	// Passed says why each other candidate is not a socket.
	Passed []string
	// NodeRuntime is the Node's status.nodeInfo.containerRuntimeVersion
	// ("": unknown: no API access, or no Node name).
	NodeRuntime string
	// KubeletEndpoint is kubelet's configured runtime endpoint, its
	// --container-runtime-endpoint or its config file's
	// containerRuntimeEndpoint, as seen from kubelet ("": unknown); the
	// socket it names here, if any, is marked Kubelet.
	KubeletEndpoint string
}

// ChooseEndpoint picks the CRI runtime of --runtime-endpoint auto: the one
// kubelet uses, as kubelet's own endpoint says, else as the Node's runtime
// version names it among the sockets that answer; with neither known, the
// one socket that answers (or, none answering, the one that exists). It
// refuses to guess: an error names the sockets found and the flag to set
// when more than one could be the runtime, when the Node's runtime is in
// none of them, or when kubelet's endpoint runs another runtime than the
// Node says. With no socket at all it returns the first candidate, not
// found (Found false).
func ChooseEndpoint(candidates []string, f EndpointFacts) (EndpointChoice, error) {
	c := EndpointChoice{Passed: f.Passed}
	if f.KubeletEndpoint != "" {
		var match []RuntimeSocket
		for _, s := range f.Sockets {
			if s.Kubelet {
				match = append(match, s)
			}
		}
		if len(match) != 1 {
			return c, refuse(f, fmt.Sprintf("kubelet's runtime endpoint %s is %d of the sockets found here", f.KubeletEndpoint, len(match)))
		}
		s := match[0]
		if s.Runtime != "" && f.NodeRuntime != "" && runtimeName(s.Runtime) != runtimeName(f.NodeRuntime) {
			return c, refuse(f, fmt.Sprintf("kubelet's endpoint %s runs %s, but the Node's runtime is %s", f.KubeletEndpoint, s.Runtime, f.NodeRuntime))
		}
		c.Endpoint, c.Found, c.From = s.Endpoint, true, "auto: kubelet's runtime endpoint, "+f.KubeletEndpoint
		return c, nil
	}
	if f.NodeRuntime != "" {
		var match []RuntimeSocket
		for _, s := range f.Sockets {
			if s.Runtime != "" && runtimeName(s.Runtime) == runtimeName(f.NodeRuntime) {
				match = append(match, s)
			}
		}
		if len(match) != 1 {
			return c, refuse(f, fmt.Sprintf("the Node's runtime is %s, and %d of the sockets that answer run it", f.NodeRuntime, len(match)))
		}
		c.Endpoint, c.Found, c.From = match[0].Endpoint, true, "auto: the Node's runtime, "+f.NodeRuntime
		return c, nil
	}
	var answering []RuntimeSocket
	for _, s := range f.Sockets {
		if s.Runtime != "" {
			answering = append(answering, s)
		}
	}
	switch {
	case len(answering) == 1:
		c.Endpoint, c.Found, c.From = answering[0].Endpoint, true, "auto: the only runtime socket that answers"
		return c, nil
	case len(answering) > 1:
		return c, refuse(f, "more than one runtime socket answers, and neither kubelet's endpoint nor the Node's runtime is known")
	case len(f.Sockets) == 1:
		c.Endpoint, c.Found, c.From = f.Sockets[0].Endpoint, true, "auto: the only runtime socket, which does not answer yet"
		return c, nil
	case len(f.Sockets) > 1:
		return c, refuse(f, "more than one runtime socket exists, none answers, and neither kubelet's endpoint nor the Node's runtime is known")
	}
	if len(candidates) > 0 {
		c.Endpoint = candidates[0]
	}
	return c, nil
}

// refuse is ChooseEndpoint's error: why, the sockets found and the flag.
func refuse(f EndpointFacts, why string) error {
	found := make([]string, 0, len(f.Sockets))
	for _, s := range f.Sockets {
		if s.Runtime != "" {
			found = append(found, s.Endpoint+" ("+s.Runtime+")")
		} else {
			found = append(found, s.Endpoint+" (no answer: "+s.Err+")")
		}
	}
	if len(found) == 0 {
		found = append(found, "none")
	}
	return fmt.Errorf("--runtime-endpoint auto: %s; sockets found: %s: refusing to guess, set --runtime-endpoint to the socket kubelet uses",
		why, strings.Join(found, ", "))
}

// runtimeName is the name of a runtime version ("cri-o" of "cri-o://1.34.11").
func runtimeName(v string) string {
	name, _, _ := strings.Cut(v, "://")
	return strings.ToLower(name)
}

// SameEndpoint reports whether a and b (socket paths or unix:// URLs) name
// the same socket path, reading /var/run as /run (a symlink on every
// node).
func SameEndpoint(a, b string) bool {
	return socketPath(a) == socketPath(b)
}

func socketPath(e string) string {
	p := filepath.Clean(strings.TrimPrefix(e, "unix://"))
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
		p = "/run/" + rest
	}
	return p
}
