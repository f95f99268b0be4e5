package adopt

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

// call is one plugin invocation seen by recordingExec or fakeExecutor.
type call struct {
	Verb  string
	Type  string
	Stdin string
}

// recordingExec stands in for the plugin binaries under real libcni: it
// records what libcni sends, and answers ADD with a result in the config's
// version, so that libcni writes its real cache file.
type recordingExec struct {
	mu    sync.Mutex
	calls []call
}

var _ invoke.Exec = (*recordingExec)(nil)

func (x *recordingExec) ExecPlugin(_ context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	verb := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "CNI_COMMAND="); ok {
			verb = v
		}
	}
	x.mu.Lock()
	x.calls = append(x.calls, call{Verb: verb, Type: filepath.Base(pluginPath), Stdin: string(stdin)})
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

func (x *recordingExec) FindInPath(plugin string, _ []string) (string, error) {
	return "/opt/cni/bin/" + plugin, nil
}

func (x *recordingExec) Decode(data []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(data)
}

func (x *recordingExec) take() []call {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := x.calls
	x.calls = nil
	return out
}

// primaryConf is a realistic primary: bridge with host-local, portmap with
// its capability, and a plugin with a static runtimeConfig that libcni
// replaces when it injects capability args.
const primaryConf = `{
  "cniVersion": "1.0.0",
  "name": "k8s-pod-net",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.22.0.0/24"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true, "bandwidth": false}, "snat": true},
    {"type": "tuning", "capabilities": {"mac": true}, "runtimeConfig": {"static": 1}, "sysctl": {"net.core.somaxconn": "500"}}
  ]
}`

// pod is one attachment made through real libcni.
type pod struct {
	ContainerID, IfName, NetNS string
	Args                       [][2]string
	CapArgs                    map[string]any
}

func (p pod) rt(cacheDir string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.ContainerID, NetNS: p.NetNS, IfName: p.IfName, Args: p.Args,
		CapabilityArgs: p.CapArgs, CacheDir: cacheDir}
}

// addThroughLibcni runs a real libcni ADD of conf for p, which writes
// <cacheDir>/results/<network>-<containerID>-<ifname>, and returns the
// calls libcni made.
func addThroughLibcni(t testing.TB, conf, cacheDir string, p pod) []call {
	t.Helper()
	x := &recordingExec{}
	list, err := libcni.NetworkConfFromBytes([]byte(conf))
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, cacheDir, x)
	_, err = cni.AddNetworkList(context.Background(), list, p.rt(cacheDir))
	require.NoError(t, err)
	return x.take()
}

// delThroughLibcni runs the DEL libcni itself would run with the cached
// conflist, and returns the calls it made.
func delThroughLibcni(t *testing.T, cacheDir, network string, p pod) []call {
	t.Helper()
	x := &recordingExec{}
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, cacheDir, x)
	// The cached config is what go-cni would use if the primary were
	// still in place; GetNetworkListCachedConfig reads it back.
	cached, _, err := cni.GetNetworkListCachedConfig(&libcni.NetworkConfigList{Name: network}, p.rt(cacheDir))
	require.NoError(t, err)
	require.NotEmpty(t, cached)
	list, err := libcni.NetworkConfFromBytes(cached)
	require.NoError(t, err)
	require.NoError(t, cni.DelNetworkList(context.Background(), list, p.rt(cacheDir)))
	return x.take()
}

// withoutPrevResult drops prevResult from a plugin's stdin.
func withoutPrevResult(t *testing.T, stdin string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(stdin), &m))
	delete(m, "prevResult")
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return string(out)
}
