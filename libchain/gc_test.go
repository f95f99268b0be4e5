package libchain

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// clock is a settable clock for Engine.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)} }
func gcReq(conf *NetConf) Request {
	return Request{Conf: conf, Args: RuntimeArgs{Path: "/opt/cni/bin"}}
}
func keyOf(conf *NetConf, cid string) cache.Key {
	return cache.Key{Network: conf.Name, ContainerID: cid, IfName: "eth0"}
}

// gcHarness adds c1..cn (complete) at the clock's time with a 1.1.0 chain.
func gcHarness(t *testing.T, cids ...string) (*harness, *clock, *NetConf) {
	t.Helper()
	h := newHarness()
	c := newClock()
	h.eng.Now = c.now
	conf := chainConf(t, "1.1.0", dIPAM, dPort)
	for _, cid := range cids {
		_, err := h.eng.Add(context.Background(), req(conf, cid))
		require.NoError(t, err)
	}
	h.exec.reset()
	return h, c, conf
}

func TestGCTearsDownOnlyDead(t *testing.T) {
	h, c, conf := gcHarness(t, "live", "dead")
	c.advance(time.Hour)
	conf.ValidAttachments = []byte(`[{"containerID":"live","ifname":"eth0"}]`)
	require.NoError(t, h.eng.GC(context.Background(), gcReq(conf)))

	assert.Equal(t, []string{"DEL portmap", "DEL ipam", "GC ipam", "GC portmap"}, h.exec.seen())
	assert.Equal(t, "dead", h.exec.callsOf("DEL", "ipam")[0].ContainerID)
	h.noRecord(t, req(conf, "dead"))
	assert.Equal(t, cache.PhaseComplete, h.record(t, req(conf, "live")).Phase, "a listed, complete attachment is never touched")
	va := h.exec.callsOf("GC", "ipam")[0].Config["cni.dev/valid-attachments"]
	assert.Equal(t, []any{map[string]any{"containerID": "live", "ifname": "eth0"}}, va)
}

func TestGCInFlightSafety(t *testing.T) {
	t.Run("younger than the grace period: skipped and kept alive for the delegates", func(t *testing.T) {
		h, c, conf := gcHarness(t, "young")
		c.advance(time.Minute) // default grace is 2m
		rep, err := h.eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: []Attachment{}})
		require.NoError(t, err)
		assert.Empty(t, rep.TornDown)
		require.Len(t, rep.Skipped, 1)
		assert.Contains(t, rep.Skipped[0].Reason, "grace period")
		assert.Empty(t, h.exec.callsOf("DEL", "ipam"))
		va := h.exec.callsOf("GC", "ipam")[0].Config["cni.dev/valid-attachments"]
		assert.Equal(t, []any{map[string]any{"containerID": "young", "ifname": "eth0"}}, va,
			"the delegates must not reclaim what catena still tracks")
	})
	t.Run("lock held: skipped", func(t *testing.T) {
		h, c, conf := gcHarness(t, "busy")
		c.advance(time.Hour)
		u, err := h.store.Lock(context.Background(), keyOf(conf, "busy"), cache.Holder{PID: 1, Verb: "DEL"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = u.Unlock() })
		rep, err := h.eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: []Attachment{}})
		require.NoError(t, err)
		require.Len(t, rep.Skipped, 1)
		assert.Contains(t, rep.Skipped[0].Reason, "in flight")
		assert.Empty(t, h.exec.callsOf("DEL", "ipam"))
	})
	t.Run("grace period override and dry run", func(t *testing.T) {
		h, c, conf := gcHarness(t, "a")
		c.advance(time.Minute)
		rep, err := h.eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: []Attachment{}, GracePeriod: time.Second, DryRun: true})
		require.NoError(t, err)
		assert.Equal(t, []cache.Key{keyOf(conf, "a")}, rep.WouldTearDown)
		assert.Empty(t, h.exec.seen(), "a dry run invokes nothing")
		h.record(t, req(conf, "a"))
	})
}

func TestGCRetriesNeedsTeardownEvenWhenListed(t *testing.T) {
	h, c, conf := gcHarness(t)
	h.exec.set("portmap", behaviour{failAdd: true})
	h.exec.set("ipam", behaviour{failDel: true})
	_, err := h.eng.Add(context.Background(), req(conf, "c1"))
	require.Error(t, err)
	assert.Equal(t, cache.PhaseNeedsTeardown, h.record(t, req(conf, "c1")).Phase)

	c.advance(time.Hour)
	h.exec.set("ipam", behaviour{})
	h.exec.reset()
	conf.ValidAttachments = []byte(`[{"containerID":"c1","ifname":"eth0"}]`)
	require.NoError(t, h.eng.GC(context.Background(), gcReq(conf)))
	assert.Equal(t, []string{"DEL ipam", "GC ipam", "GC portmap"}, h.exec.seen())
	h.noRecord(t, req(conf, "c1"))
}

func TestGCContinuesPastErrors(t *testing.T) {
	h, c, conf := gcHarness(t, "c1", "c2")
	c.advance(time.Hour)
	h.exec.set("portmap", behaviour{failDel: true, failGC: true})
	rep, err := h.eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{Valid: []Attachment{}})
	require.Error(t, err)
	assert.Equal(t, types.ErrInternal, cniCode(t, err))
	assert.Len(t, rep.Errors, 3, "two failed teardowns and one failed delegate GC: %v", rep.Errors)
	assert.Len(t, h.exec.callsOf("DEL", "portmap"), 2, "the second record is tried after the first failed")
	va := h.exec.callsOf("GC", "ipam")[0].Config["cni.dev/valid-attachments"]
	assert.Len(t, va, 2, "records still needing teardown stay valid for the delegates")
}

func TestGCRefusals(t *testing.T) {
	t.Run("disableGC", func(t *testing.T) {
		h, c, conf := gcHarness(t, "c1")
		c.advance(time.Hour)
		conf.DisableGC = true
		conf.ValidAttachments = []byte(`[]`)
		require.NoError(t, h.eng.GC(context.Background(), gcReq(conf)))
		assert.Empty(t, h.exec.seen())
		h.record(t, req(conf, "c1"))
	})
	t.Run("no valid list", func(t *testing.T) {
		h, c, conf := gcHarness(t, "c1")
		c.advance(time.Hour)
		err := h.eng.GC(context.Background(), gcReq(conf))
		require.Error(t, err)
		assert.Equal(t, types.ErrInvalidNetworkConfig, cniCode(t, err))
		assert.Contains(t, err.Error(), "cni.dev/valid-attachments")
		h.record(t, req(conf, "c1"))
	})
}

func TestGCStaleNetNS(t *testing.T) {
	h, c, conf := gcHarness(t)
	dir := t.TempDir()
	alive := filepath.Join(dir, "alive")
	require.NoError(t, os.WriteFile(alive, nil, 0o600))
	for cid, ns := range map[string]string{"alive": alive, "gone": filepath.Join(dir, "gone")} {
		r := req(conf, cid)
		r.Args.NetNS = ns
		_, err := h.eng.Add(context.Background(), r)
		require.NoError(t, err)
	}
	c.advance(time.Hour)
	h.exec.reset()
	rep, err := h.eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{StaleNetNS: true})
	require.NoError(t, err)
	assert.Equal(t, []cache.Key{keyOf(conf, "gone")}, rep.TornDown)
	assert.Equal(t, []string{"DEL portmap", "DEL ipam"}, h.exec.seen(), "no delegate GC without a runtime's list")
	assert.Equal(t, "", h.exec.callsOf("DEL", "ipam")[0].NetNS, "a gone netns is not passed")
	h.record(t, req(conf, "alive"))
}

// A crash during an ADD's first record write leaves a temp file and no
// record, so DEL never looks at it; GC sweeps it once it is older than the
// grace period, and leaves a young one alone.
func TestGCSweepsCrashedTempFiles(t *testing.T) {
	fsys := afero.NewMemMapFs()
	store := cache.NewDiskStore(fsys, "/var/lib/cni/catena", cache.NewMemLocker())
	exec := newFakeExec()
	eng := &Engine{Store: store, Exec: exec}
	conf := chainConf(t, "1.1.0", dIPAM, dPort)
	dir := "/var/lib/cni/catena/records/" + conf.Name
	require.NoError(t, fsys.MkdirAll(dir, 0o700))
	oldTemp, youngTemp := dir+"/.old:eth0.json.tmp", dir+"/.young:eth0.json.tmp"
	for path, age := range map[string]time.Duration{oldTemp: time.Hour, youngTemp: time.Second} {
		require.NoError(t, afero.WriteFile(fsys, path, []byte(`{"schema":1,"to`), 0o600))
		mtime := time.Now().Add(-age)
		require.NoError(t, fsys.Chtimes(path, mtime, mtime))
	}
	rep, err := eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{oldTemp}, rep.SweptTemps)
	_, err = fsys.Stat(oldTemp)
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = fsys.Stat(youngTemp)
	assert.NoError(t, err, "a temp file younger than the grace period may be a write in progress")

	rep, err = eng.CollectGarbage(context.Background(), gcReq(conf), GCOptions{DryRun: true, GracePeriod: time.Millisecond})
	require.NoError(t, err)
	assert.Empty(t, rep.SweptTemps, "a dry run removes nothing")
	_, err = fsys.Stat(youngTemp)
	assert.NoError(t, err)
}

// confWithValid is the config of gcHarness's network as a runtime sends it
// on GC: cni.dev/valid-attachments is the raw JSON valid, or absent if
// valid is "".
func confWithValid(t *testing.T, valid string) *NetConf {
	t.Helper()
	key := ""
	if valid != "" {
		key = `"cni.dev/valid-attachments":` + valid + `,`
	}
	return confWithKeys(t, key)
}

// confWithKeys is confWithValid's config with the JSON members keys (each
// followed by a comma) in place of the valid list.
func confWithKeys(t *testing.T, keys string) *NetConf {
	t.Helper()
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"podnet","type":"catena","cacheDir":"/var/lib/cni/catena",` +
		`"delegateTimeout":"200ms","lockTimeout":"100ms",` + keys + `"delegates":[` + dIPAM + `,` + dPort + `]}`))
	require.NoError(t, err)
	return conf
}

// TestGCValidListNullIsEmpty: libcni marshals a runtime's nil list as
// null (CRI-O's, on a network without sandboxes, at every start), and its
// own GC then reclaims every attachment it cached: Catena reads null as
// [], and refuses only a GC without the key.
func TestGCValidListNullIsEmpty(t *testing.T) {
	tornDown := []string{"DEL portmap", "DEL ipam", "DEL portmap", "DEL ipam", "GC ipam", "GC portmap"}
	for _, tc := range []struct {
		name, valid string
		cids        []string
		wantCode    uint // 0: GC succeeds
		wantSeen    []string
	}{
		{name: "null, no records", valid: "null", wantSeen: []string{"GC ipam", "GC portmap"}},
		{name: "[], no records", valid: "[]", wantSeen: []string{"GC ipam", "GC portmap"}},
		{name: "null, records not in use", valid: "null", cids: []string{"c1", "c2"}, wantSeen: tornDown},
		{name: "[], records not in use", valid: "[]", cids: []string{"c1", "c2"}, wantSeen: tornDown},
		{name: "absent, no records", wantCode: types.ErrInvalidNetworkConfig},
		{name: "absent, records", cids: []string{"c1"}, wantCode: types.ErrInvalidNetworkConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, c, _ := gcHarness(t, tc.cids...)
			c.advance(time.Hour)
			conf := confWithValid(t, tc.valid)
			err := h.eng.GC(context.Background(), gcReq(conf))
			if tc.wantCode != 0 {
				require.Error(t, err)
				assert.Equal(t, tc.wantCode, cniCode(t, err))
				assert.Contains(t, err.Error(), "cni.dev/valid-attachments: missing on GC")
				assert.Empty(t, h.exec.seen())
				for _, cid := range tc.cids {
					h.record(t, req(conf, cid))
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantSeen, h.exec.seen())
			for _, cid := range tc.cids {
				h.noRecord(t, req(conf, cid))
			}
			va := h.exec.callsOf("GC", "ipam")[0].Config["cni.dev/valid-attachments"]
			assert.Equal(t, []any{}, va, "the delegates get an empty list")
		})
	}
}
