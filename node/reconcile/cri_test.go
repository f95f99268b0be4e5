package reconcile

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/reconcile/fakecri"
)

// TestCRILister: every sandbox, READY or NOTREADY, over a real gRPC unix
// socket; a slow runtime and a missing socket are errors, within the
// timeout.
func TestCRILister(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	srv, err := fakecri.Start(sock)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	srv.Set("a", "b", "c")
	for _, endpoint := range []string{sock, "unix://" + sock} {
		l, err := DialCRI(endpoint)
		require.NoError(t, err)
		ids, err := listWithin(context.Background(), l, time.Second)
		require.NoError(t, err)
		assert.Equal(t, map[string]struct{}{"a": {}, "b": {}, "c": {}}, ids)
		require.NoError(t, l.Close())
	}

	srv.SetDelay(time.Second)
	l, err := DialCRI(sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	start := time.Now()
	_, err = listWithin(context.Background(), l, 100*time.Millisecond)
	assert.ErrorContains(t, err, "DeadlineExceeded")
	assert.Less(t, time.Since(start), 900*time.Millisecond)

	gone, err := DialCRI(filepath.Join(t.TempDir(), "none.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = gone.Close() })
	_, err = listWithin(context.Background(), gone, time.Second)
	assert.ErrorContains(t, err, "ListPodSandbox")

	_, err = DialCRI("tcp://127.0.0.1:1")
	assert.ErrorContains(t, err, "only unix sockets")
}
