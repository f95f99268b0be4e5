package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plantedTeardown leaves, on network net of w, a record that needs
// teardown whose only held delegate is a failer logging to log: a failed
// rollback, then the fault is lifted, so that any later teardown of it
// would run that DEL and log "DEL <victim> ...". It returns the victim's
// runtime config and its record file.
func plantedTeardown(t *testing.T, w *world, c *ctl, log string) (*libcni.RuntimeConf, string) {
	t.Helper()
	fault := filepath.Join(t.TempDir(), "fault")
	require.NoError(t, os.WriteFile(fault, nil, 0o600))
	failing := w.gcList(c.list.Name, "1ms",
		failer(fmt.Sprintf(`"failDel":true,"faultFile":%q,"logFile":%q`, fault, log)), failer(`"failAdd":true`))
	victim := &libcni.RuntimeConf{ContainerID: w.id + "-victim", NetNS: w.netns, IfName: "eth0"}
	_, err := w.cni.AddNetworkList(bg, failing, victim)
	require.Error(t, err)
	recs := w.records(c.list.Name)
	require.Len(t, recs, 1)
	require.Equal(t, "needs-teardown", readRecord(t, recs[0])["phase"])
	require.NoError(t, os.Remove(fault))
	require.NoError(t, os.Truncate(log, 0))
	return victim, recs[0]
}

// TestUntrustedCacheEntriesAreNeverActedOn: a record
// that another user could have written (a record file owned by another
// uid, or a record dir writable by others) is never acted on, by a retrier
// an ordinary ADD starts, by catenactl repair or by DEL.
// Every refusal names the path, its owner and mode, and the fix; STATUS
// reports it with code 50.
func TestUntrustedCacheEntriesAreNeverActedOn(t *testing.T) {
	tests := []struct {
		name string
		// plant makes the record or its dir untrusted and returns the
		// path and the "owner/mode" text every refusal must name.
		plant func(t *testing.T, w *world, net, rec string) (path, owner, mode string)
		// addFails: the next ADD on the network is refused (its own record
		// dir is untrusted), rather than succeeding and leaving the
		// planted record alone.
		addFails bool
	}{
		{"record owned by another uid", func(t *testing.T, w *world, net, rec string) (string, string, string) {
			require.NoError(t, os.Chown(rec, 65534, 65534))
			return rec, "uid 65534", "mode 0600"
		}, false},
		{"network dir writable by others", func(t *testing.T, w *world, net, rec string) (string, string, string) {
			dir := filepath.Dir(rec)
			require.NoError(t, os.Chmod(dir, 0o777))
			require.NoError(t, os.Chown(rec, 65534, 65534))
			return dir, "uid 0", "mode 0777"
		}, true},
		{"cache dir owned by another uid", func(t *testing.T, w *world, net, rec string) (string, string, string) {
			require.NoError(t, os.Chown(w.cacheDir, 65534, 65534))
			return w.cacheDir, "uid 65534", "mode 0700"
		}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			net := fmt.Sprintf("ittrust%d", i)
			log := filepath.Join(t.TempDir(), "failer.log")
			c := w.newCtl(net, failer(fmt.Sprintf(`"logFile":%q`, log)))
			victim, rec := plantedTeardown(t, w, c, log)
			path, owner, mode := tt.plant(t, w, net, rec)
			neverRan := func(what string) {
				t.Helper()
				logged, err := os.ReadFile(log)
				require.NoError(t, err)
				assert.NotContains(t, string(logged), "DEL "+victim.ContainerID, "%s never ran the planted DEL", what)
			}
			mentions := func(msg, what string) {
				t.Helper()
				for _, want := range []string{path, owner, mode, "chown"} {
					assert.Contains(t, msg, want, "%s names %q", what, want)
				}
			}

			next := &libcni.RuntimeConf{ContainerID: w.id + "-next", NetNS: w.netns, IfName: "eth1"}
			_, err := w.cni.AddNetworkList(bg, c.list, next)
			if tt.addFails {
				var te *types.Error
				if assert.True(t, errors.As(err, &te), "ADD is refused with a CNI error: %v", err) {
					assert.Equal(t, uint(types.ErrIOFailure), te.Code)
					mentions(te.Msg, "the refused ADD")
				}
			} else {
				require.NoError(t, err)
				t.Cleanup(func() { _ = w.cni.DelNetworkList(bg, c.list, next) })
			}
			reapRetriers(t, w.cacheDir, 20*time.Second)
			neverRan("an ADD and the retrier it may start")
			_, stderr, code := c.run("repair")
			assert.NotEqual(t, 0, code, "repair fails")
			mentions(stderr, "catenactl repair")
			neverRan("catenactl repair")

			err = w.cni.DelNetworkList(bg, c.list, victim)
			var te *types.Error
			if assert.True(t, errors.As(err, &te), "DEL of the planted record is refused: %v", err) {
				assert.Equal(t, uint(types.ErrIOFailure), te.Code)
				mentions(te.Msg, "the refused DEL")
				t.Logf("DEL: code %d: %s", te.Code, te.Msg)
			}
			neverRan("DEL")

			err = w.cni.GetStatusNetworkList(bg, c.list)
			if assert.True(t, errors.As(err, &te), "STATUS reports it: %v", err) {
				assert.Equal(t, uint(types.ErrPluginNotAvailable), te.Code)
				mentions(te.Msg, "STATUS")
			}
			_, err = os.Lstat(rec)
			assert.NoError(t, err, "the planted record is left in place for the operator")
			if !tt.addFails {
				logged, err := os.ReadFile(log)
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(string(logged), "ADD "+next.ContainerID+" "), "the ADD ran: %s", logged)
			}
		})
	}
}
