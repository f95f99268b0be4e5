package libchain

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/integration/schema1"
)

// Teardown of the records catena 1daa3b7 wrote (integration/schema1) by
// this build's engine, with fake delegates: exactly the delegates that
// still hold something are DELed, in reverse, each with the config cached
// at ADD and the latest result as prevResult in its own version.

// schema1Held is, per record, the delegates a teardown must DEL, in order.
var schema1Held = map[string][]string{
	"s1-a-complete":         {"tuning", "portmap", "bridge"},
	"s1-d-v040-complete":    {"tuning", "portmap", "bridge"},
	"s1-e-crashed-add":      {"tuning", "portmap", "bridge"}, // tuning's ADD outcome is unknown: best-effort DEL
	"s1-f-crashed-rollback": {"portmap", "bridge"},           // the failer was DELed before the crash
	"s1-c-del-failed":       {"failer", "portmap", "bridge"}, // tuning was DELed before the failer's DEL failed
	"s1-b-rollback-failed":  {"failer", "portmap", "bridge"}, // the failAdd failer got its best-effort DEL
}

// oldStep is a step as the record file's newest line has it, read with
// plain encoding/json rather than the store's decoder.
type oldStep struct {
	Type       string          `json:"type"`
	CNIVersion string          `json:"cniVersion"`
	State      string          `json:"state"`
	Config     json.RawMessage `json:"config"`
}

func oldSteps(t *testing.T, containerID string) []oldStep {
	t.Helper()
	raw, err := schema1.Raw(containerID)
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	var env struct {
		Record struct {
			Steps []oldStep `json:"steps"`
		} `json:"record"`
	}
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &env))
	return env.Record.Steps
}

// schema1Engine is an engine over a fresh cache dir holding the old
// records, with fake delegates, every recorded netns gone, and a clock
// long after the records were made.
func schema1Engine(t *testing.T) (*Engine, *fakeExec, *cache.DiskStore) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "catena")
	require.NoError(t, schema1.Copy(dir))
	store := cache.NewDiskStore(afero.NewOsFs(), dir, cache.NewMemLocker())
	ex := newFakeExec()
	eng := &Engine{Store: store, Exec: ex,
		StatNetNS: func(string) (cache.NetNSIdentity, error) { return cache.NetNSIdentity{}, fs.ErrNotExist },
		Now:       func() time.Time { return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) }}
	return eng, ex, store
}

// schema1Conf is today's config of the network: a plain 3-delegate chain
// (the records' own cached configs are what teardown uses).
func schema1Conf(t *testing.T, valid string) *NetConf {
	t.Helper()
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"` + schema1.Network + `","type":"catena",
	  "delegateTimeout":"1s","lockTimeout":"1s","cni.dev/valid-attachments":` + valid + `,
	  "delegates":[{"type":"bridge"},{"type":"portmap"},{"type":"tuning"}]}`))
	require.NoError(t, err)
	return conf
}

// assertTornDown checks the DEL calls made for one record against what it
// says, and that the record and its pending marker are gone.
func assertTornDown(t *testing.T, ex *fakeExec, store *cache.DiskStore, att schema1.Attachment, netns string) {
	t.Helper()
	steps := oldSteps(t, att.ContainerID)
	var got []string
	for _, c := range ex.calls {
		if c.Verb != "DEL" || c.ContainerID != att.ContainerID {
			continue
		}
		got = append(got, c.Type)
		assert.Equal(t, netns, c.NetNS, "%s DEL of %s", att.ContainerID, c.Type)
		var cached map[string]any
		for _, s := range steps {
			if s.Type == c.Type && (s.State == "added" || s.State == "del-failed" || s.State == "starting") {
				require.NoError(t, json.Unmarshal(s.Config, &cached))
			}
		}
		sent := map[string]any{}
		for k, v := range c.Config {
			if k != "prevResult" {
				sent[k] = v
			}
		}
		assert.Equal(t, cached, sent, "%s DEL of %s: the config cached at ADD", att.ContainerID, c.Type)
		prev := c.prevResult()
		assert.Equal(t, cached["cniVersion"], prev["cniVersion"], "%s DEL of %s: prevResult in the delegate's version", att.ContainerID, c.Type)
		ips, _ := prev["ips"].([]any)
		require.Len(t, ips, 1, "%s DEL of %s: prevResult %v", att.ContainerID, c.Type, prev)
		assert.Equal(t, att.IP, ips[0].(map[string]any)["address"])
	}
	assert.Equal(t, schema1Held[att.ContainerID], got, "%s: the held delegates, in reverse", att.ContainerID)
	key := cache.Key{Network: schema1.Network, ContainerID: att.ContainerID, IfName: schema1.IfName}
	_, err := store.Load(key)
	require.ErrorIs(t, err, cache.ErrNotFound, "%s: the record is removed", att.ContainerID)
	_, marked, err := store.PendingNoteOf(key)
	require.NoError(t, err)
	assert.False(t, marked, "%s: no pending marker is left", att.ContainerID)
}

// TestSchema1DelTearsDownWhatIsHeld: a runtime's DEL of each old record.
func TestSchema1DelTearsDownWhatIsHeld(t *testing.T) {
	require.Len(t, schema1Held, len(schema1.Attachments))
	for _, att := range schema1.Attachments {
		t.Run(att.ContainerID, func(t *testing.T) {
			eng, ex, store := schema1Engine(t)
			r := Request{Conf: schema1Conf(t, "[]"), Args: RuntimeArgs{
				ContainerID: att.ContainerID, IfName: schema1.IfName, NetNS: att.NetNS, Path: "/opt/cni/bin"}}
			require.NoError(t, eng.Del(context.Background(), r))
			assertTornDown(t, ex, store, att, att.NetNS)
			assert.Len(t, ex.calls, len(schema1Held[att.ContainerID]), "no other call: %v", ex.seen())
		})
	}
}

// TestSchema1GC: GC with a valid list naming a, c and d tears down every
// old record that is not complete (c too: it needs teardown even though
// listed), with no CNI_NETNS (the old build recorded no netns identity and
// the netns is gone), and leaves the listed complete ones untouched.
func TestSchema1GC(t *testing.T) {
	eng, ex, store := schema1Engine(t)
	valid := `[{"containerID":"s1-a-complete","ifname":"eth0"},{"containerID":"s1-c-del-failed","ifname":"eth0"},
	  {"containerID":"s1-d-v040-complete","ifname":"eth0"}]`
	require.NoError(t, eng.GC(context.Background(), Request{Conf: schema1Conf(t, valid), Args: RuntimeArgs{Path: "/opt/cni/bin"}}))
	for _, id := range []string{"s1-b-rollback-failed", "s1-c-del-failed", "s1-e-crashed-add", "s1-f-crashed-rollback"} {
		assertTornDown(t, ex, store, schema1.ByID(id), "")
	}
	for _, id := range []string{"s1-a-complete", "s1-d-v040-complete"} {
		assert.Empty(t, ex.callsOf("DEL", id), id)
		rec, err := store.Load(cache.Key{Network: schema1.Network, ContainerID: id, IfName: schema1.IfName})
		require.NoError(t, err, id)
		assert.Equal(t, cache.PhaseComplete, rec.Phase, id)
	}
	for _, c := range ex.calls {
		if c.Verb == "DEL" {
			assert.NotContains(t, []string{"s1-a-complete", "s1-d-v040-complete"}, c.ContainerID)
		}
	}
	assert.Equal(t, []string{"GC bridge", "GC portmap", "GC tuning"}, ex.seen()[len(ex.seen())-3:], "then GC is forwarded")
}
