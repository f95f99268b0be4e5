package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// errNoKubelet: no kubelet process is seen.
var errNoKubelet = errors.New("no kubelet process found")

// Kubelet is the node's kubelet as FindKubelet saw it.
type Kubelet struct {
	// Endpoint is its runtime endpoint, as kubelet sees it.
	Endpoint string
	// Root is its root directory as this process reaches it
	// (/proc/<pid>/root): where Endpoint's path is.
	Root string
}

// FindKubelet finds the node's kubelet under proc (procfs' mount point;
// "" means /proc, which shows the host's processes only with hostPID) and
// its runtime endpoint: its --container-runtime-endpoint, else
// containerRuntimeEndpoint in its --config file (read through its root;
// the flag wins, as in kubelet). It is an error when no kubelet is seen,
// when kubelets disagree, or when none of them says: kubelet's own
// default is not assumed.
func FindKubelet(proc string) (Kubelet, error) {
	if proc == "" {
		proc = "/proc"
	}
	dirs, err := filepath.Glob(filepath.Join(proc, "[0-9]*"))
	if err != nil {
		return Kubelet{}, err
	}
	var found []Kubelet
	var why []string
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "kubelet" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			why = append(why, fmt.Sprintf("kubelet pid %s: %v", filepath.Base(d), err))
			continue
		}
		e, err := kubeletArgsEndpoint(d, strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00"))
		if err != nil {
			why = append(why, fmt.Sprintf("kubelet pid %s: %v", filepath.Base(d), err))
			continue
		}
		if !slices.ContainsFunc(found, func(k Kubelet) bool { return SameEndpoint(k.Endpoint, e) }) {
			found = append(found, Kubelet{Endpoint: e, Root: filepath.Join(d, "root")})
		}
	}
	switch {
	case len(found) == 1 && len(why) == 0:
		return found[0], nil
	case len(found) > 1:
		ends := make([]string, len(found))
		for i, k := range found {
			ends[i] = k.Endpoint
		}
		return Kubelet{}, fmt.Errorf("kubelets with different runtime endpoints: %s", strings.Join(ends, ", "))
	case len(why) > 0:
		return Kubelet{}, errors.New(strings.Join(why, "; "))
	}
	return Kubelet{}, errNoKubelet
}

// Mark sets f's KubeletEndpoint, and marks Kubelet the socket of f that
// is kubelet's: the same path, or the same socket (device and inode)
// as kubelet's path through its root, for a socket dir mounted elsewhere
// here. It changes nothing, and says why, when kubelet's socket cannot
// be seen through its root and no path is the same.
func (k Kubelet) Mark(f *EndpointFacts) error {
	byPath := slices.IndexFunc(f.Sockets, func(s RuntimeSocket) bool { return SameEndpoint(s.Endpoint, k.Endpoint) })
	theirs, err := os.Stat(filepath.Join(k.Root, strings.TrimPrefix(k.Endpoint, "unix://")))
	if err != nil && byPath < 0 {
		return fmt.Errorf("kubelet's runtime endpoint %s: %w", k.Endpoint, err)
	}
	for i := range f.Sockets {
		ours, serr := os.Stat(strings.TrimPrefix(f.Sockets[i].Endpoint, "unix://"))
		f.Sockets[i].Kubelet = i == byPath || err == nil && serr == nil && os.SameFile(ours, theirs)
	}
	f.KubeletEndpoint = k.Endpoint
	return nil
}

// kubeletArgsEndpoint is the runtime endpoint of the kubelet at procDir
// whose command line is args.
func kubeletArgsEndpoint(procDir string, args []string) (string, error) {
	endpoint, config := flagValue(args, "container-runtime-endpoint"), flagValue(args, "config")
	if endpoint != "" {
		return endpoint, nil
	}
	if config == "" {
		return "", errors.New("neither --container-runtime-endpoint nor --config on its command line")
	}
	path := config
	if !filepath.IsAbs(path) {
		path = filepath.Join("cwd", path)
	} else {
		path = filepath.Join("root", path)
	}
	raw, err := os.ReadFile(filepath.Join(procDir, path))
	if err != nil {
		return "", fmt.Errorf("its --config %s: %w", config, err)
	}
	var c struct {
		ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint"`
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return "", fmt.Errorf("its --config %s: %w", config, err)
	}
	if c.ContainerRuntimeEndpoint == "" {
		return "", fmt.Errorf("its --config %s sets no containerRuntimeEndpoint", config)
	}
	return c.ContainerRuntimeEndpoint, nil
}

// flagValue is the last value of --name (or -name) in args, as
// "--name=v" or "--name v"; "" if absent.
func flagValue(args []string, name string) string {
	v := ""
	for i := 1; i < len(args); i++ {
		a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		if a == args[i] {
			continue // not a flag
		}
		if rest, ok := strings.CutPrefix(a, name+"="); ok {
			v = rest
		} else if a == name && i+1 < len(args) {
			v = args[i+1]
			i++
		}
	}
	return v
}
