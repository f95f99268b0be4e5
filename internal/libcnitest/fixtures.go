package libcnitest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// TestPod is the attachment the tests make through libcni.
var TestPod = Pod{
	// Container IDs may contain '-': the file name alone is ambiguous.
	ContainerID: "pod-a-0123456789abcdef", IfName: "eth0", NetNS: "/var/run/netns/cni-1234",
	Args: [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web-1"}},
	CapArgs: map[string]any{
		"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}},
		"bandwidth":    map[string]any{"ingressRate": 1000}, // declared false: must not reach portmap
		"mac":          "0a:58:0a:16:00:05",
	},
}

// TestKey is TestPod's attachment on PrimaryConf's network.
var TestKey = cache.Key{Network: "k8s-pod-net", ContainerID: TestPod.ContainerID, IfName: "eth0"}

// FakeExecutor records what Catena's engine invokes.
type FakeExecutor struct{ Calls []Call }

var _ libchain.Executor = (*FakeExecutor)(nil)

// Add panics: adopted attachments are never added.
func (f *FakeExecutor) Add(context.Context, libchain.Call) (types.Result, error) {
	panic("adopted attachments are never added")
}

// Run records c.
func (f *FakeExecutor) Run(_ context.Context, c libchain.Call) error {
	f.Calls = append(f.Calls, Call{Verb: c.Verb, Type: c.Type, Stdin: string(c.Config)})
	return nil
}

// CatenaConf wraps conf's plugins as Catena's delegates, as the agent does.
func CatenaConf(t *testing.T, conf, cacheDir string) *libchain.NetConf {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(conf), &m))
	wrapped, err := json.Marshal(map[string]any{
		"cniVersion": m["cniVersion"], "name": m["name"], "type": "catena", "cacheDir": cacheDir,
		"capabilities": map[string]bool{"portMappings": true, "mac": true}, "delegates": m["plugins"],
	})
	require.NoError(t, err)
	nc, err := libchain.ParseConfig(wrapped)
	require.NoError(t, err)
	return nc
}

// RealEntry returns the libcni cache file real libcni wrote for TestPod,
// decoded, so that each case changes one thing of a genuine entry.
func RealEntry(t testing.TB) map[string]any {
	t.Helper()
	dir := t.TempDir()
	AddThroughLibcni(t, PrimaryConf, dir, TestPod)
	data, err := os.ReadFile(filepath.Join(dir, "results", "k8s-pod-net-"+TestPod.ContainerID+"-eth0"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	require.Equal(t, "cniCacheV1", m["kind"])
	return m
}

// EncodeEntry encodes a decoded entry.
func EncodeEntry(t testing.TB, m map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(m)
	require.NoError(t, err)
	return data
}

// WithConfig sets an entry's cached conflist.
func WithConfig(conf string) func(map[string]any) {
	return func(m map[string]any) { m["config"] = base64.StdEncoding.EncodeToString([]byte(conf)) }
}

// Entries that are not a regular file holding a libcni entry.

// SymlinkEntry makes path a symlink.
func SymlinkEntry(t *testing.T, path string) { require.NoError(t, os.Symlink("/etc/hostname", path)) }

// DirEntry makes path a directory.
func DirEntry(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o700)) }

// FifoEntry makes path a FIFO.
func FifoEntry(t *testing.T, path string) { require.NoError(t, syscall.Mkfifo(path, 0o600)) }

// JunkEntry makes path a file that is not JSON.
func JunkEntry(t *testing.T, path string) {
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o600))
}

// Nobody is the uid of a user other than Catena's.
const Nobody = 65534

// RequireRootForChown skips t unless it runs as root.
func RequireRootForChown(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("planting a file of another uid needs root")
	}
}

// Plant writes a genuine entry of container id in resultsDir, owned by uid
// with perm, and returns its name.
func Plant(t *testing.T, resultsDir, id string, uid int, perm os.FileMode) string {
	t.Helper()
	m := RealEntry(t)
	m["containerId"] = id
	name := "k8s-pod-net-" + id + "-eth0"
	path := filepath.Join(resultsDir, name)
	require.NoError(t, os.WriteFile(path, EncodeEntry(t, m), 0o600))
	require.NoError(t, os.Chown(path, uid, uid))
	require.NoError(t, os.Chmod(path, perm))
	return name
}

// World is a libcni cache dir and a Catena cache dir on the real
// filesystem, under the test's temp dir, with Catena's DiskStore over the
// latter and a buffer for logs.
type World struct {
	LibcniDir, CatenaDir string
	Store                *cache.DiskStore
	Log                  *bytes.Buffer
}

// NewWorld makes a World in t.TempDir().
func NewWorld(t *testing.T) *World {
	t.Helper()
	root := t.TempDir()
	w := &World{LibcniDir: filepath.Join(root, "libcni"), CatenaDir: filepath.Join(root, "catena"), Log: &bytes.Buffer{}}
	w.Store = cache.NewDiskStore(afero.NewOsFs(), w.CatenaDir, cache.NewFlockLocker(filepath.Join(w.CatenaDir, cache.LocksDir)))
	return w
}

// ResultsDir is libcni's cache of results in the World.
func (w *World) ResultsDir() string { return filepath.Join(w.LibcniDir, "results") }
