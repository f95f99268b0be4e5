package libcnitest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/require"
)

// Call is one plugin invocation seen by RecordingExec or FakeExecutor.
type Call struct {
	Verb  string
	Type  string
	Stdin string
}

// RecordingExec stands in for the plugin binaries under real libcni: it
// records what libcni sends, and answers ADD with a result in the config's
// version, so that libcni writes its real cache file.
type RecordingExec struct {
	mu    sync.Mutex
	calls []Call
}

var _ invoke.Exec = (*RecordingExec)(nil)

// ExecPlugin records the call and answers it.
func (x *RecordingExec) ExecPlugin(_ context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	verb := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "CNI_COMMAND="); ok {
			verb = v
		}
	}
	x.mu.Lock()
	x.calls = append(x.calls, Call{Verb: verb, Type: filepath.Base(pluginPath), Stdin: string(stdin)})
	x.mu.Unlock()
	if verb != "ADD" {
		return nil, nil
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"cniVersion":%q,"interfaces":[{"name":"eth0","mac":"0a:58:0a:16:00:05","sandbox":"/var/run/netns/cni-1"}],`+
		`"ips":[{"address":"10.22.0.5/24","gateway":"10.22.0.1","interface":0}],"dns":{}}`, conf.CNIVersion), nil
}

// FindInPath puts every plugin in /opt/cni/bin.
func (x *RecordingExec) FindInPath(plugin string, _ []string) (string, error) {
	return "/opt/cni/bin/" + plugin, nil
}

// Decode decodes a VERSION answer.
func (x *RecordingExec) Decode(data []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(data)
}

// Take returns the calls recorded since the last Take.
func (x *RecordingExec) Take() []Call {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := x.calls
	x.calls = nil
	return out
}

// PrimaryConf is a realistic primary: bridge with host-local, portmap with
// its capability, and a plugin with a static runtimeConfig that libcni
// replaces when it injects capability args.
const PrimaryConf = `{
  "cniVersion": "1.0.0",
  "name": "k8s-pod-net",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.22.0.0/24"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true, "bandwidth": false}, "snat": true},
    {"type": "tuning", "capabilities": {"mac": true}, "runtimeConfig": {"static": 1}, "sysctl": {"net.core.somaxconn": "500"}}
  ]
}`

// Pod is one attachment made through real libcni.
type Pod struct {
	ContainerID, IfName, NetNS string
	Args                       [][2]string
	CapArgs                    map[string]any
}

// RT is p's runtime config for libcni, caching in cacheDir.
func (p Pod) RT(cacheDir string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.ContainerID, NetNS: p.NetNS, IfName: p.IfName, Args: p.Args,
		CapabilityArgs: p.CapArgs, CacheDir: cacheDir}
}

// AddThroughLibcni runs a real libcni ADD of conf for p, which writes
// <cacheDir>/results/<network>-<containerID>-<ifname>, and returns the
// calls libcni made.
func AddThroughLibcni(t testing.TB, conf, cacheDir string, p Pod) []Call {
	t.Helper()
	x := &RecordingExec{}
	list, err := libcni.NetworkConfFromBytes([]byte(conf))
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, cacheDir, x)
	_, err = cni.AddNetworkList(context.Background(), list, p.RT(cacheDir))
	require.NoError(t, err)
	return x.Take()
}

// DelThroughLibcni runs the DEL libcni itself would run with the cached
// conflist, and returns the calls it made.
func DelThroughLibcni(t *testing.T, cacheDir, network string, p Pod) []Call {
	t.Helper()
	x := &RecordingExec{}
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, cacheDir, x)
	// The cached config is what go-cni would use if the primary were
	// still in place; GetNetworkListCachedConfig reads it back.
	cached, _, err := cni.GetNetworkListCachedConfig(&libcni.NetworkConfigList{Name: network}, p.RT(cacheDir))
	require.NoError(t, err)
	require.NotEmpty(t, cached)
	list, err := libcni.NetworkConfFromBytes(cached)
	require.NoError(t, err)
	require.NoError(t, cni.DelNetworkList(context.Background(), list, p.RT(cacheDir)))
	return x.Take()
}
