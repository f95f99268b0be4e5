package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// chainConf builds a catena config over the given delegate JSON objects.
func chainConf(t testing.TB, version string, delegates ...string) *NetConf {
	t.Helper()
	ds := ""
	for i, d := range delegates {
		if i > 0 {
			ds += ","
		}
		ds += d
	}
	conf, err := ParseConfig([]byte(fmt.Sprintf(
		`{"cniVersion":%q,"name":"podnet","type":"catena","cacheDir":"/var/lib/cni/catena","delegateTimeout":"200ms","lockTimeout":"100ms","delegates":[%s]}`,
		version, ds)))
	require.NoError(t, err)
	return conf
}

const (
	dIPAM  = `{"type":"ipam"}`
	dPort  = `{"type":"portmap"}`
	dTune  = `{"type":"tuning"}`
	dFail  = `{"type":"failer"}`
	dOther = `{"type":"other"}`
)

type harness struct {
	exec  *fakeExec
	store *memStore
	eng   *Engine
}

func newHarness() *harness {
	h := &harness{exec: newFakeExec(), store: newMemStore()}
	h.eng = &Engine{Store: h.store, Exec: h.exec}
	return h
}

func req(conf *NetConf, cid string) Request {
	return Request{Conf: conf, Args: RuntimeArgs{ContainerID: cid, IfName: "eth0", NetNS: "/var/run/netns/" + cid, Path: "/opt/cni/bin"}}
}

func (h *harness) record(t *testing.T, r Request) *cache.Record {
	t.Helper()
	rec, err := h.store.Load(r.Key())
	require.NoError(t, err)
	return rec
}

func (h *harness) noRecord(t *testing.T, r Request) {
	t.Helper()
	_, err := h.store.Load(r.Key())
	require.ErrorIs(t, err, cache.ErrNotFound)
}

func cniCode(t *testing.T, err error) uint {
	t.Helper()
	var te *types.Error
	require.True(t, errors.As(err, &te), "want a *types.Error, got %T: %v", err, err)
	return te.Code
}

func states(rec *cache.Record) []cache.StepState {
	out := make([]cache.StepState, len(rec.Steps))
	for i, s := range rec.Steps {
		out[i] = s.State
	}
	return out
}

func TestAddSuccess(t *testing.T) {
	h := newHarness()
	conf := chainConf(t, "1.1.0", dIPAM, dPort, dTune)
	r := req(conf, "c1")

	res, err := h.eng.Add(context.Background(), r)
	require.NoError(t, err)
	got, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", got.CNIVersion)
	require.Len(t, got.IPs, 1)
	assert.Equal(t, "10.0.0.1/24", got.IPs[0].Address.String())

	assert.Equal(t, []string{"ADD ipam", "ADD portmap", "ADD tuning"}, h.exec.seen())
	// delegate i gets the result of delegate i-1 as prevResult
	assert.Nil(t, h.exec.callsOf("ADD", "ipam")[0].prevResult())
	for _, typ := range []string{"portmap", "tuning"} {
		prev := h.exec.callsOf("ADD", typ)[0].prevResult()
		require.NotNil(t, prev, typ)
		assert.Equal(t, "1.1.0", prev["cniVersion"])
	}
	rec := h.record(t, r)
	assert.Equal(t, cache.PhaseComplete, rec.Phase)
	assert.Equal(t, []cache.StepState{cache.StepAdded, cache.StepAdded, cache.StepAdded}, states(rec))
	// every delegate inherits name and cniVersion, in the cached config
	for _, s := range rec.Steps {
		assert.Contains(t, string(s.Config), `"name":"podnet"`)
		assert.Contains(t, string(s.Config), `"cniVersion":"1.1.0"`)
		assert.NotContains(t, string(s.Config), "prevResult")
	}
	saves, removes := h.store.counts()
	assert.Equal(t, 4, saves, "n delegates cost n+1 durable writes")
	assert.Equal(t, 0, removes)
}

func TestAddFailureRollsBack(t *testing.T) {
	tests := []struct {
		name      string
		delegates []string
		failing   string
		b         behaviour
		wantCalls []string
		wantCode  uint
	}{
		{
			name:      "middle delegate fails ADD",
			delegates: []string{dIPAM, dFail, dTune},
			failing:   "failer", b: behaviour{failAdd: true, code: 104},
			wantCalls: []string{"ADD ipam", "ADD failer", "DEL failer", "DEL ipam"},
			wantCode:  104,
		},
		{
			name:      "failed delegate also fails its best-effort DEL",
			delegates: []string{dIPAM, dPort, dFail},
			failing:   "failer", b: behaviour{failAdd: true, failDel: true},
			wantCalls: []string{"ADD ipam", "ADD portmap", "ADD failer", "DEL failer", "DEL portmap", "DEL ipam"},
			wantCode:  100,
		},
		{
			name:      "first delegate fails",
			delegates: []string{dFail, dIPAM},
			failing:   "failer", b: behaviour{failAdd: true, code: 7},
			wantCalls: []string{"ADD failer", "DEL failer"},
			wantCode:  7,
		},
		{
			name:      "delegate times out: unknown outcome, best-effort DEL",
			delegates: []string{dIPAM, dFail},
			failing:   "failer", b: behaviour{hangAdd: true},
			wantCalls: []string{"ADD ipam", "ADD failer", "DEL failer", "DEL ipam"},
			wantCode:  types.ErrTryAgainLater,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			h.exec.set(tt.failing, tt.b)
			r := req(chainConf(t, "1.0.0", tt.delegates...), "c1")
			_, err := h.eng.Add(context.Background(), r)
			require.Error(t, err)
			assert.Equal(t, tt.wantCode, cniCode(t, err))
			assert.Contains(t, err.Error(), "delegate")
			assert.Contains(t, err.Error(), "(failer) ADD failed")
			assert.Contains(t, err.Error(), "podnet/c1/eth0")
			assert.Contains(t, err.Error(), "rolled back")
			assert.Equal(t, tt.wantCalls, h.exec.seen())
			h.noRecord(t, r)
		})
	}
}

func TestAddTimeoutNamesDelegateAndTimeout(t *testing.T) {
	h := newHarness()
	h.exec.set("failer", behaviour{hangAdd: true})
	r := req(chainConf(t, "1.0.0", dIPAM, dFail), "c1")
	start := time.Now()
	_, err := h.eng.Add(context.Background(), r)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, err.Error(), "delegate 1 (failer)")
	assert.Contains(t, err.Error(), "timed out after 200ms")
}

func TestRollbackPrevResultIsLatest(t *testing.T) {
	h := newHarness()
	h.exec.set("failer", behaviour{failAdd: true})
	r := req(chainConf(t, "1.0.0", dIPAM, dPort, dFail), "c1")
	_, err := h.eng.Add(context.Background(), r)
	require.Error(t, err)
	for _, typ := range []string{"portmap", "ipam", "failer"} {
		dels := h.exec.callsOf("DEL", typ)
		require.Len(t, dels, 1, typ)
		prev := dels[0].prevResult()
		require.NotNil(t, prev, "DEL %s gets the latest result", typ)
		assert.NotEmpty(t, prev["ips"], typ)
	}
}

func TestFailedRollbackKeepsRecordAndDelRetries(t *testing.T) {
	h := newHarness()
	h.exec.set("failer", behaviour{failAdd: true})
	h.exec.set("portmap", behaviour{failDel: true})
	r := req(chainConf(t, "1.0.0", dIPAM, dPort, dFail), "c1")

	_, err := h.eng.Add(context.Background(), r)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "delegate 2 (failer) ADD failed")
	assert.Contains(t, err.Error(), "rollback incomplete")
	assert.Contains(t, err.Error(), "delegate 1 (portmap) DEL failed")
	// strict reverse order: teardown stops at the failed required DEL, so
	// the IP (delegate 0) is still held rather than freed under a stale rule
	assert.Equal(t, []string{"ADD ipam", "ADD portmap", "ADD failer", "DEL failer", "DEL portmap"}, h.exec.seen())
	rec := h.record(t, r)
	assert.Equal(t, cache.PhaseNeedsTeardown, rec.Phase)
	assert.Equal(t, []cache.StepState{cache.StepAdded, cache.StepDelFailed, cache.StepDeleted}, states(rec))
	assert.NotEmpty(t, rec.AddError)
	assert.Contains(t, rec.LastError, "portmap")
	assert.Equal(t, 1, rec.Steps[1].DelAttempts)

	// DEL while the fault holds: code 11, still recorded
	h.exec.reset()
	err = h.eng.Del(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, types.ErrTryAgainLater, cniCode(t, err))
	assert.Equal(t, []string{"DEL portmap"}, h.exec.seen())
	assert.Equal(t, 2, h.record(t, r).Steps[1].DelAttempts)
	assert.Equal(t, 2, h.record(t, r).TeardownAttempts)

	// fault lifted: DEL finishes the teardown
	h.exec.set("portmap", behaviour{})
	h.exec.reset()
	require.NoError(t, h.eng.Del(context.Background(), r))
	assert.Equal(t, []string{"DEL portmap", "DEL ipam"}, h.exec.seen())
	h.noRecord(t, r)
}

func TestDel(t *testing.T) {
	t.Run("no record: success, nothing invoked", func(t *testing.T) {
		h := newHarness()
		require.NoError(t, h.eng.Del(context.Background(), req(chainConf(t, "1.0.0", dIPAM), "nope")))
		assert.Empty(t, h.exec.seen())
	})
	t.Run("twice, second invokes nothing", func(t *testing.T) {
		h := newHarness()
		r := req(chainConf(t, "1.0.0", dIPAM, dPort, dTune), "c1")
		_, err := h.eng.Add(context.Background(), r)
		require.NoError(t, err)
		h.exec.reset()
		require.NoError(t, h.eng.Del(context.Background(), r))
		assert.Equal(t, []string{"DEL tuning", "DEL portmap", "DEL ipam"}, h.exec.seen())
		h.noRecord(t, r)
		h.exec.reset()
		require.NoError(t, h.eng.Del(context.Background(), r))
		assert.Empty(t, h.exec.seen())
	})
	t.Run("without netns, with the config cached at ADD", func(t *testing.T) {
		h := newHarness()
		r := req(chainConf(t, "1.0.0", `{"type":"ipam","marker":"at-add"}`, dPort), "c1")
		_, err := h.eng.Add(context.Background(), r)
		require.NoError(t, err)
		h.exec.reset()
		// today's config on disk differs: one delegate fewer, another marker
		del := req(chainConf(t, "1.0.0", `{"type":"ipam","marker":"today"}`), "c1")
		del.Args.NetNS = ""
		require.NoError(t, h.eng.Del(context.Background(), del))
		assert.Equal(t, []string{"DEL portmap", "DEL ipam"}, h.exec.seen())
		c := h.exec.callsOf("DEL", "ipam")[0]
		assert.Equal(t, "at-add", c.Config["marker"])
		assert.Equal(t, "", c.NetNS)
	})
	t.Run("required DEL fails: stop, keep record, code 11", func(t *testing.T) {
		h := newHarness()
		r := req(chainConf(t, "1.0.0", dIPAM, dPort, dTune), "c1")
		_, err := h.eng.Add(context.Background(), r)
		require.NoError(t, err)
		h.exec.set("tuning", behaviour{failDel: true})
		h.exec.reset()
		err = h.eng.Del(context.Background(), r)
		require.Error(t, err)
		assert.Equal(t, types.ErrTryAgainLater, cniCode(t, err))
		assert.Contains(t, err.Error(), "delegate 2 (tuning) DEL failed")
		assert.Equal(t, []string{"DEL tuning"}, h.exec.seen())
		rec := h.record(t, r)
		assert.Equal(t, cache.PhaseNeedsTeardown, rec.Phase)
		assert.Equal(t, []cache.StepState{cache.StepAdded, cache.StepAdded, cache.StepDelFailed}, states(rec))
	})
	t.Run("durable writes: none until a step fails, then the record says what is held", func(t *testing.T) {
		h := newHarness()
		r := req(chainConf(t, "1.0.0", dIPAM, dPort, dTune), "c1")
		_, err := h.eng.Add(context.Background(), r)
		require.NoError(t, err)
		saves0, removes0 := h.store.counts()
		h.exec.set("portmap", behaviour{failDel: true})
		require.Error(t, h.eng.Del(context.Background(), r))
		saves1, removes1 := h.store.counts()
		assert.Equal(t, 1, saves1-saves0, "one save, recording the failed DEL")
		assert.Equal(t, 0, removes1-removes0)
		rec := h.record(t, r)
		assert.Equal(t, []cache.StepState{cache.StepAdded, cache.StepDelFailed, cache.StepDeleted}, states(rec))
		assert.Equal(t, 1, rec.TeardownAttempts)

		h.exec.set("portmap", behaviour{})
		h.exec.reset()
		require.NoError(t, h.eng.Del(context.Background(), r))
		assert.Equal(t, []string{"DEL portmap", "DEL ipam"}, h.exec.seen(), "tuning, already deleted, is not DELed again")
		saves2, removes2 := h.store.counts()
		assert.Equal(t, 0, saves2-saves1, "a clean DEL only removes the record")
		assert.Equal(t, 1, removes2-removes1)
		h.noRecord(t, r)
	})
	t.Run("corrupt record: moved aside, best-effort DEL from current config, success", func(t *testing.T) {
		h := newHarness()
		r := req(chainConf(t, "1.0.0", dIPAM, dPort), "c1")
		_, err := h.eng.Add(context.Background(), r)
		require.NoError(t, err)
		h.store.corrupt[r.Key()] = true
		h.exec.set("portmap", behaviour{failDel: true})
		h.exec.reset()
		require.NoError(t, h.eng.Del(context.Background(), r))
		assert.Equal(t, []string{"DEL portmap", "DEL ipam"}, h.exec.seen())
		assert.Equal(t, []cache.Key{r.Key()}, h.store.moved)
		h.noRecord(t, r)
	})
	t.Run("record of a crashed ADD: DEL only what started", func(t *testing.T) {
		h := newHarness()
		r := req(chainConf(t, "1.0.0", dIPAM, dPort, dTune), "c1")
		rec, err := h.eng.newRecord(r, r.Key())
		require.NoError(t, err)
		rec.Steps[0].State = cache.StepAdded
		rec.Steps[1].State = cache.StepStarting // died while portmap ran
		require.NoError(t, h.store.Save(rec))
		h.exec.set("portmap", behaviour{failDel: true}) // unknown: best effort
		require.NoError(t, h.eng.Del(context.Background(), r))
		assert.Equal(t, []string{"DEL portmap", "DEL ipam"}, h.exec.seen())
		h.noRecord(t, r)
	})
}

func TestRepeatedAdd(t *testing.T) {
	t.Run("complete record: error, nothing changes", func(t *testing.T) {
		h := newHarness()
		r := req(chainConf(t, "1.0.0", dIPAM), "c1")
		_, err := h.eng.Add(context.Background(), r)
		require.NoError(t, err)
		before := h.record(t, r)
		h.exec.reset()
		_, err = h.eng.Add(context.Background(), r)
		require.Error(t, err)
		assert.Equal(t, types.ErrInvalidEnvironmentVariables, cniCode(t, err))
		assert.Contains(t, err.Error(), "already added")
		assert.Empty(t, h.exec.seen())
		assert.Equal(t, before, h.record(t, r))
	})
	t.Run("record needing teardown: finished first, then ADD", func(t *testing.T) {
		h := newHarness()
		h.exec.set("failer", behaviour{failAdd: true})
		h.exec.set("ipam", behaviour{failDel: true})
		r := req(chainConf(t, "1.0.0", dIPAM, dFail), "c1")
		_, err := h.eng.Add(context.Background(), r)
		require.Error(t, err)
		assert.Equal(t, cache.PhaseNeedsTeardown, h.record(t, r).Phase)

		h.exec.set("failer", behaviour{})
		h.exec.set("ipam", behaviour{})
		h.exec.reset()
		_, err = h.eng.Add(context.Background(), r)
		require.NoError(t, err)
		assert.Equal(t, []string{"DEL ipam", "ADD ipam", "ADD failer"}, h.exec.seen())
		assert.Equal(t, cache.PhaseComplete, h.record(t, r).Phase)
	})
	t.Run("earlier teardown still failing: ADD refused with code 11", func(t *testing.T) {
		h := newHarness()
		h.exec.set("failer", behaviour{failAdd: true})
		h.exec.set("ipam", behaviour{failDel: true})
		r := req(chainConf(t, "1.0.0", dIPAM, dFail), "c1")
		_, err := h.eng.Add(context.Background(), r)
		require.Error(t, err)
		h.exec.reset()
		_, err = h.eng.Add(context.Background(), r)
		require.Error(t, err)
		assert.Equal(t, types.ErrTryAgainLater, cniCode(t, err))
		assert.Equal(t, []string{"DEL ipam"}, h.exec.seen())
	})
}

func TestStoreFailureDuringAdd(t *testing.T) {
	h := newHarness()
	h.store.failSave = func(n int) error {
		if n == 2 {
			return errors.New("no space left on device")
		}
		return nil
	}
	r := req(chainConf(t, "1.0.0", dIPAM, dPort, dTune), "c1")
	_, err := h.eng.Add(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, types.ErrIOFailure, cniCode(t, err))
	assert.Contains(t, err.Error(), "no space left on device")
	assert.Contains(t, err.Error(), "rolled back")
	// portmap was never invoked; ipam was rolled back
	assert.Equal(t, []string{"ADD ipam", "DEL ipam"}, h.exec.seen())
	h.noRecord(t, r)
}

func TestCheck(t *testing.T) {
	h := newHarness()
	conf := chainConf(t, "1.0.0", dIPAM, `{"type":"portmap","cniVersion":"0.3.1"}`, dTune)
	r := req(conf, "c1")

	err := h.eng.Check(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, types.ErrUnknownContainer, cniCode(t, err))

	_, err = h.eng.Add(context.Background(), r)
	require.NoError(t, err)
	h.exec.reset()
	require.NoError(t, h.eng.Check(context.Background(), r))
	// portmap at 0.3.1 has no CHECK
	assert.Equal(t, []string{"CHECK ipam", "CHECK tuning"}, h.exec.seen())
	prev := h.exec.callsOf("CHECK", "tuning")[0].prevResult()
	require.NotNil(t, prev)
	assert.Equal(t, "1.0.0", prev["cniVersion"])

	h.exec.set("tuning", behaviour{failCheck: true, code: 110})
	err = h.eng.Check(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, uint(110), cniCode(t, err))
	assert.Contains(t, err.Error(), "delegate 2 (tuning) CHECK failed")
}

func TestStatusAndGC(t *testing.T) {
	h := newHarness()
	conf := chainConf(t, "1.1.0", dIPAM, `{"type":"portmap","cniVersion":"1.0.0"}`, dOther)
	conf.ValidAttachments = []byte(`[{"containerID":"c1","ifname":"eth0"}]`)
	r := Request{Conf: conf, Args: RuntimeArgs{Path: "/opt/cni/bin"}}

	require.NoError(t, h.eng.Status(context.Background(), r))
	assert.Equal(t, []string{"STATUS ipam", "STATUS other"}, h.exec.seen())

	h.exec.set("other", behaviour{failStatus: true})
	err := h.eng.Status(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, types.ErrPluginNotAvailable, cniCode(t, err))
	assert.Contains(t, err.Error(), "delegate 2 (other)")

	h.exec.reset()
	require.NoError(t, h.eng.GC(context.Background(), r))
	assert.Equal(t, []string{"GC ipam", "GC other"}, h.exec.seen())
	va := h.exec.callsOf("GC", "ipam")[0].Config["cni.dev/valid-attachments"]
	assert.Equal(t, []any{map[string]any{"containerID": "c1", "ifname": "eth0"}}, va)
}

func TestVersionConversion(t *testing.T) {
	h := newHarness()
	conf := chainConf(t, "1.1.0", dIPAM, `{"type":"portmap","cniVersion":"0.3.1"}`, `{"type":"tuning","cniVersion":"0.4.0"}`)
	r := req(conf, "c1")
	res, err := h.eng.Add(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", res.Version())
	pm := h.exec.callsOf("ADD", "portmap")[0]
	assert.Equal(t, "0.3.1", pm.Config["cniVersion"])
	assert.Equal(t, "0.3.1", pm.prevResult()["cniVersion"])
	assert.Equal(t, "0.4.0", h.exec.callsOf("ADD", "tuning")[0].prevResult()["cniVersion"])
	rec := h.record(t, r)
	assert.Contains(t, string(rec.Result), `"cniVersion":"1.1.0"`)
	assert.Contains(t, string(rec.Steps[1].Result), `"cniVersion":"0.3.1"`)
}

func TestOldCatenaVersions(t *testing.T) {
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			h := newHarness()
			r := req(chainConf(t, v, dIPAM, dTune), "c1")
			res, err := h.eng.Add(context.Background(), r)
			require.NoError(t, err)
			assert.Equal(t, v, res.Version())
			require.NoError(t, h.eng.Del(context.Background(), r))
			h.noRecord(t, r)
		})
	}
}

func TestRuntimeConfigAndUnknownFields(t *testing.T) {
	h := newHarness()
	conf := chainConf(t, "1.0.0",
		`{"type":"ipam","futureKnob":{"x":[1,2]}}`,
		`{"type":"portmap","capabilities":{"portMappings":true}}`,
		`{"type":"tuning","capabilities":{"bandwidth":true}}`)
	conf.RuntimeConfig = map[string]json.RawMessage{
		"portMappings": []byte(`[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]`),
		"ips":          []byte(`["10.1.1.1"]`),
	}
	r := req(conf, "c1")
	_, err := h.eng.Add(context.Background(), r)
	require.NoError(t, err)
	ipam := h.exec.callsOf("ADD", "ipam")[0].Config
	assert.Equal(t, map[string]any{"x": []any{1.0, 2.0}}, ipam["futureKnob"])
	assert.NotContains(t, ipam, "runtimeConfig")
	pm := h.exec.callsOf("ADD", "portmap")[0].Config
	assert.Equal(t, map[string]any{"portMappings": []any{map[string]any{"hostPort": 8080.0, "containerPort": 80.0, "protocol": "tcp"}}}, pm["runtimeConfig"])
	assert.NotContains(t, h.exec.callsOf("ADD", "tuning")[0].Config, "runtimeConfig")
}

func TestLockTimeoutNamesHolder(t *testing.T) {
	h := newHarness()
	r := req(chainConf(t, "1.0.0", dIPAM), "c1")
	u, err := h.store.TryLock(r.Key(), cache.Holder{PID: 4242, Verb: "ADD", Since: time.Now()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = u.Unlock() })

	_, err = h.eng.Add(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, types.ErrTryAgainLater, cniCode(t, err))
	assert.Contains(t, err.Error(), "pid 4242")
	assert.Empty(t, h.exec.seen())

	// another attachment is not blocked
	_, err = h.eng.Add(context.Background(), req(r.Conf, "c2"))
	require.NoError(t, err)
}

func TestInvalidAttachmentTouchesNothing(t *testing.T) {
	tests := []struct{ name, cid, ifname string }{
		{"container ID escapes", "../../etc", "eth0"},
		{"ifname with slash", "c1", "a/b"},
		{"ifname dot-dot", "c1", ".."},
		{"empty container ID", "", "eth0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			r := req(chainConf(t, "1.0.0", dIPAM), tt.cid)
			r.Args.IfName = tt.ifname
			_, err := h.eng.Add(context.Background(), r)
			require.Error(t, err)
			code := cniCode(t, err)
			assert.Contains(t, []uint{types.ErrInvalidEnvironmentVariables, types.ErrUnknownContainer}, code)
			require.Error(t, h.eng.Del(context.Background(), r))
			assert.Empty(t, h.exec.seen())
			saves, removes := h.store.counts()
			assert.Zero(t, saves+removes)
		})
	}
}
