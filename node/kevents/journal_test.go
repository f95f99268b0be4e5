package kevents

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
)

// scriptedExec is a libchain.Executor whose delegates answer from a table:
// the error each verb of each type fails with ("" succeeds).
type scriptedExec struct {
	fail map[string]string // "VERB type" -> error message
}

var _ libchain.Executor = (*scriptedExec)(nil)

func (x *scriptedExec) Add(_ context.Context, c libchain.Call) (types.Result, error) {
	if msg := x.fail["ADD "+c.Type]; msg != "" {
		return nil, types.NewError(types.ErrInternal, msg, "")
	}
	return &current.Result{CNIVersion: "1.1.0"}, nil
}

func (x *scriptedExec) Run(_ context.Context, c libchain.Call) error {
	if msg := x.fail[c.Verb+" "+c.Type]; msg != "" {
		return types.NewError(types.ErrInternal, msg, "")
	}
	return nil
}

// TestWatcherSeesAFailedADDWithLongErrors: an ADD whose delegates fail
// with errors of 10,000 '<' (which JSON writes as \u003c, six bytes each)
// is journaled by the engine as the catena plugin journals it, and the
// watcher reads it: the rollback's event names what is still held, and
// the hold counts.
func TestWatcherSeesAFailedADDWithLongErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "catena")
	long := strings.Repeat("<", 10000)
	conf, err := libchain.ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"n","type":"catena","cacheDir":` +
		`"` + dir + `","delegates":[{"type":"bridge"},{"type":"seed"}]}`))
	require.NoError(t, err)
	j := &events.Writer{CacheDir: dir}
	eng := &libchain.Engine{
		Store: cache.NewDiskStore(afero.NewOsFs(), dir, cache.NewFlockLocker(filepath.Join(dir, cache.LocksDir))),
		Exec:  &scriptedExec{fail: map[string]string{"ADD seed": long, "DEL seed": long, "DEL bridge": long}},
		OnOp:  func(op events.Op) { require.NoError(t, j.Append(op)) },
	}
	rec := &recorded{}
	w := &Watcher{CacheDir: dir, Node: "node1", HeldThreshold: 1, Emitter: rec}
	require.NoError(t, w.Start())

	_, err = eng.Add(context.Background(), libchain.Request{Conf: conf, Args: libchain.RuntimeArgs{ContainerID: "c1",
		IfName: "eth0", NetNS: "/var/run/netns/c1", Args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_UID=u1"}})
	require.Error(t, err)
	raw, err := os.ReadFile(events.Path(dir))
	require.NoError(t, err)
	require.NoError(t, w.Poll(t0))
	t.Logf("the ADD's journal line: %d bytes", len(raw))

	require.Equal(t, []string{ReasonRolledBack, ReasonTeardownsHeld}, rec.reasons(), "a journal line of %d bytes", len(raw))
	assert.Equal(t, ref, rec.facts[0].Object)
	assert.Contains(t, rec.facts[0].Message, "still held: delegate 0 (bridge)")
	n, oldest, _ := w.mapper.Held()
	assert.Equal(t, 1, n)
	assert.Equal(t, "n/c1/eth0", oldest)
}

// TestWatcherCountsUnreadableLines: a line longer than the journal's
// bound and a line that is not JSON, written by someone else, are skipped
// and counted, and the poll logs them once; the operations around them
// still make their events.
func TestWatcherCountsUnreadableLines(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "catena")
	j := &events.Writer{CacheDir: dir}
	unreadable := prometheus.NewCounter(prometheus.CounterOpts{Name: "unreadable"})
	rec := &recorded{}
	var logs bytes.Buffer
	w := &Watcher{CacheDir: dir, Emitter: rec, Unreadable: unreadable, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	require.NoError(t, w.Start())

	require.NoError(t, j.Append(heldDel("n/a/eth0")))
	f, err := os.OpenFile(events.Path(dir), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	_, err = f.WriteString(`{"verb":"DEL","error":"` + strings.Repeat("x", events.MaxLine) + "\"}\n{\"verb\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, j.Append(heldDel("n/b/eth0")))

	require.NoError(t, w.Poll(t0))
	assert.Equal(t, []string{ReasonTeardownHeld, ReasonTeardownHeld}, rec.reasons())
	assert.Equal(t, 2.0, testutil.ToFloat64(unreadable), "the long line and the torn one")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 1, "one warning for the poll: %s", logs.String())
	var warning map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &warning))
	assert.Equal(t, "events", warning["reader"])
	assert.Equal(t, 2.0, warning["lines"])
	assert.Equal(t, events.Path(dir), warning["first"])
	assert.Contains(t, warning["why"], "longer than 65536 bytes")

	require.NoError(t, w.Poll(t0))
	assert.Equal(t, 2.0, testutil.ToFloat64(unreadable), "each line is counted once")
	assert.Len(t, strings.Split(strings.TrimSpace(logs.String()), "\n"), 1, "and logged once")
}
