package libchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeProber answers VERSION for the fake delegates: supported[typ], or
// errs[typ], or hangs until the deadline for a type in hang.
type fakeProber struct {
	mu        sync.Mutex
	supported map[string][]string
	errs      map[string]error
	hang      map[string]bool
	probes    []string
	forgotten []string
}

var _ VersionProber = (*fakeProber)(nil)

func newFakeProber(supported map[string][]string) *fakeProber {
	return &fakeProber{supported: supported, errs: map[string]error{}, hang: map[string]bool{}}
}

func (p *fakeProber) Probe(ctx context.Context, typ, _ string) (Probed, error) {
	p.mu.Lock()
	p.probes = append(p.probes, typ)
	err, hang, sup := p.errs[typ], p.hang[typ], p.supported[typ]
	p.mu.Unlock()
	bin := "/opt/cni/bin/" + typ
	if hang {
		<-ctx.Done()
		return Probed{Binary: bin}, fmt.Errorf("%s was killed: %w", bin, ctx.Err())
	}
	if err != nil {
		return Probed{Binary: bin}, err
	}
	return Probed{Binary: bin, Supported: sup}, nil
}

func (p *fakeProber) Forget(binary string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgotten = append(p.forgotten, binary)
	return nil
}

func (p *fakeProber) probed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.probes...)
}

const (
	dIPAMAuto = `{"type":"ipam","cniVersion":"auto"}`
	dPortAuto = `{"type":"portmap","cniVersion":"auto"}`
)

var (
	upTo031 = []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1"}
	upTo100 = []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"}
	upTo110 = []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}
)

func autoHarness(p *fakeProber) *harness {
	h := newHarness()
	h.eng.Versions = p
	return h
}

func TestParseAutoVersion(t *testing.T) {
	conf := chainConf(t, "1.1.0", dIPAMAuto, dPort)
	assert.True(t, conf.Delegates[0].Auto)
	assert.Empty(t, conf.Delegates[0].CNIVersion, "resolved per call, not at parse")
	assert.False(t, conf.Delegates[1].Auto)
	assert.Equal(t, "1.1.0", conf.Delegates[1].CNIVersion)
	_, err := conf.Delegates[0].Config("podnet", nil)
	require.Error(t, err, "an unresolved auto delegate is never sent")

	_, err = ParseConfig([]byte(`{"cniVersion":"auto","name":"n","type":"catena","delegates":[{"type":"bridge"}]}`))
	require.Error(t, err)
	assert.Equal(t, uint(types.ErrIncompatibleCNIVersion), cniCode(t, err), "catena's own version is the runtime's, never auto")
}

func TestNegotiate(t *testing.T) {
	for name, tc := range map[string]struct {
		supported []string
		want      string
		err       string
	}{
		"debian 1.0.0":        {supported: upTo100, want: "1.0.0"},
		"flannel 0.3.1":       {supported: upTo031, want: "0.3.1"},
		"current":             {supported: upTo110, want: "1.1.0"},
		"unordered":           {supported: []string{"1.0.0", "0.3.1", "0.4.0"}, want: "1.0.0"},
		"future ignored":      {supported: []string{"0.4.0", "1.2.0", "2.0.0"}, want: "0.4.0"},
		"legacy":              {supported: []string{"0.1.0"}, want: "0.1.0"},
		"none":                {err: "no supportedVersions"},
		"none in common":      {supported: []string{"1.2.0", "2.0.0"}, err: "none of which catena converts"},
		"not a version":       {supported: []string{"1.0.0", "latest"}, err: `"latest"`},
		"empty string listed": {supported: []string{"1.0.0", ""}, err: `""`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Negotiate(tc.supported)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func configVersion(c call) string {
	v, _ := c.Config["cniVersion"].(string)
	return v
}

func resultVersion(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		CNIVersion string `json:"cniVersion"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	return r.CNIVersion
}

// TestAutoAddConvertsBothWays: each auto delegate is called at the highest
// version it and catena share, its prevResult converted up or down to it,
// and the final result is in catena's version; DEL and CHECK call them at
// the versions the ADD recorded and never ask VERSION again.
func TestAutoAddConvertsBothWays(t *testing.T) {
	for name, tc := range map[string]struct {
		catena             string
		ipam, port         []string
		wantIPAM, wantPort string
	}{
		"catena 1.1.0 over 0.3.1 and 1.0.0": {catena: "1.1.0", ipam: upTo031, port: upTo100, wantIPAM: "0.3.1", wantPort: "1.0.0"},
		"catena 0.4.0 over 1.1.0 and 0.3.1": {catena: "0.4.0", ipam: upTo110, port: upTo031, wantIPAM: "1.1.0", wantPort: "0.3.1"},
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProber(map[string][]string{"ipam": tc.ipam, "portmap": tc.port})
			h := autoHarness(p)
			r := req(chainConf(t, tc.catena, dIPAMAuto, dPortAuto), "c1")
			res, err := h.eng.Add(context.Background(), r)
			require.NoError(t, err)
			assert.Equal(t, tc.catena, res.Version())

			ipam, port := h.exec.callsOf("ADD", "ipam"), h.exec.callsOf("ADD", "portmap")
			require.Len(t, ipam, 1)
			require.Len(t, port, 1)
			assert.Equal(t, tc.wantIPAM, configVersion(ipam[0]))
			assert.Equal(t, tc.wantPort, configVersion(port[0]))
			prev := port[0].prevResult()
			require.NotNil(t, prev, "portmap gets ipam's result")
			assert.Equal(t, tc.wantPort, prev["cniVersion"], "prevResult converted to portmap's version")
			assert.NotEmpty(t, prev["ips"])

			rec := h.record(t, r)
			assert.Equal(t, tc.wantIPAM, rec.Steps[0].CNIVersion)
			assert.Equal(t, tc.wantPort, rec.Steps[1].CNIVersion)
			assert.Equal(t, tc.wantIPAM, resultVersion(t, rec.Steps[0].Result))
			assert.Equal(t, tc.catena, resultVersion(t, rec.Result))
			assert.Equal(t, []string{"ipam", "portmap"}, p.probed())

			// Every later verb of this attachment uses the record: a binary
			// that now fails VERSION is not asked.
			p.errs["ipam"], p.errs["portmap"] = errors.New("must not be asked"), errors.New("must not be asked")
			h.exec.reset()
			require.NoError(t, h.eng.Check(context.Background(), r))
			require.NoError(t, h.eng.Del(context.Background(), r))
			for _, c := range h.exec.callsOf("DEL", "ipam") {
				assert.Equal(t, tc.wantIPAM, configVersion(c))
			}
			dels := h.exec.callsOf("DEL", "portmap")
			require.Len(t, dels, 1)
			assert.Equal(t, tc.wantPort, configVersion(dels[0]))
			assert.Equal(t, tc.wantPort, dels[0].prevResult()["cniVersion"])
			assert.Equal(t, []string{"ipam", "portmap"}, p.probed(), "no VERSION after ADD")
			h.noRecord(t, r)
		})
	}
}

// TestAutoVersionFailures: a VERSION that fails, hangs, answers garbage or
// nothing catena shares fails the ADD with code 1 naming the delegate and
// what to do, before any delegate runs and with no record; a binary that
// is not in CNI_PATH keeps its code 50.
func TestAutoVersionFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		set  func(p *fakeProber)
		code uint
		msg  []string
	}{
		"fails": {set: func(p *fakeProber) {
			p.errs["portmap"] = types.NewError(types.ErrInternal, "exit status 2", "")
		}, code: types.ErrIncompatibleCNIVersion, msg: []string{"delegate 1 (portmap)", "VERSION failed", "exit status 2", "delegates[1].cniVersion"}},
		"hangs": {set: func(p *fakeProber) { p.hang["portmap"] = true },
			code: types.ErrIncompatibleCNIVersion, msg: []string{"delegate 1 (portmap)", "timed out after 200ms (delegateTimeout)"}},
		"garbage": {set: func(p *fakeProber) { p.supported["portmap"] = []string{"1.0.0", "banana"} },
			code: types.ErrIncompatibleCNIVersion, msg: []string{"delegate 1 (portmap)", "/opt/cni/bin/portmap", `"banana"`}},
		"nothing shared": {set: func(p *fakeProber) { p.supported["portmap"] = []string{"2.0.0"} },
			code: types.ErrIncompatibleCNIVersion, msg: []string{"delegate 1 (portmap)", "none of which catena converts"}},
		"empty answer": {set: func(p *fakeProber) { p.supported["portmap"] = nil },
			code: types.ErrIncompatibleCNIVersion, msg: []string{"delegate 1 (portmap)", "no supportedVersions"}},
		"not found": {set: func(p *fakeProber) {
			p.errs["portmap"] = types.NewError(types.ErrPluginNotAvailable, `plugin "portmap" not found in CNI_PATH`, "")
		}, code: types.ErrPluginNotAvailable, msg: []string{"delegate 1 (portmap)", "not found"}},
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProber(map[string][]string{"ipam": upTo100, "portmap": upTo100})
			tc.set(p)
			h := autoHarness(p)
			r := req(chainConf(t, "1.1.0", dIPAMAuto, dPortAuto), "c1")
			_, err := h.eng.Add(context.Background(), r)
			require.Error(t, err)
			assert.Equal(t, tc.code, cniCode(t, err))
			for _, m := range tc.msg {
				assert.Contains(t, err.Error(), m)
			}
			assert.Empty(t, h.exec.seen(), "no delegate runs on a guess")
			h.noRecord(t, r)

			// STATUS says the same.
			err = h.eng.Status(context.Background(), r)
			require.Error(t, err)
			assert.Equal(t, tc.code, cniCode(t, err))
			assert.Contains(t, err.Error(), "delegate 1 (portmap)")
		})
	}
}

// TestAutoVersionLie: a delegate that claims a version in VERSION and then
// refuses it with code 1 gets an error that says so, the cached answer is
// dropped, and the ADD is rolled back.
func TestAutoVersionLie(t *testing.T) {
	p := newFakeProber(map[string][]string{"ipam": upTo100, "portmap": upTo110})
	h := autoHarness(p)
	h.exec.set("portmap", behaviour{failAdd: true, code: types.ErrIncompatibleCNIVersion})
	r := req(chainConf(t, "1.1.0", dIPAMAuto, dPortAuto), "c1")
	_, err := h.eng.Add(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, uint(types.ErrIncompatibleCNIVersion), cniCode(t, err))
	for _, m := range []string{"delegate 1 (portmap)", "refused version 1.1.0", "its VERSION (/opt/cni/bin/portmap) claims", "delegates[1].cniVersion", "rolled back"} {
		assert.Contains(t, err.Error(), m)
	}
	assert.Equal(t, []string{"/opt/cni/bin/portmap"}, p.forgotten)
	assert.Equal(t, []string{"ADD ipam", "ADD portmap", "DEL portmap", "DEL ipam"}, h.exec.seen())
	h.noRecord(t, r)

	// A pinned delegate's code 1 is its own: nothing to disown.
	p.forgotten = nil
	h.exec.reset()
	_, err = h.eng.Add(context.Background(), req(chainConf(t, "1.1.0", dIPAMAuto, dPort), "c2"))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "claims")
	assert.Empty(t, p.forgotten)
}

// TestAutoStatusAndGC: STATUS and GC reach exactly the auto delegates that
// resolve to 1.1.0, at that version.
func TestAutoStatusAndGC(t *testing.T) {
	p := newFakeProber(map[string][]string{"ipam": upTo100, "portmap": upTo110})
	h := autoHarness(p)
	conf := chainConf(t, "1.1.0", dIPAMAuto, dPortAuto)
	r := req(conf, "")
	require.NoError(t, h.eng.Status(context.Background(), r))
	assert.Equal(t, []string{"STATUS portmap"}, h.exec.seen())
	assert.Equal(t, "1.1.0", configVersion(h.exec.callsOf("STATUS", "portmap")[0]))

	h.exec.reset()
	conf.ValidAttachments = json.RawMessage(`[]`)
	require.NoError(t, h.eng.GC(context.Background(), req(conf, "")))
	assert.Equal(t, []string{"GC portmap"}, h.exec.seen())

	// A GC continues past a delegate whose VERSION fails, and reports it.
	h.exec.reset()
	p.errs["ipam"] = errors.New("exit status 1")
	err := h.eng.GC(context.Background(), req(conf, ""))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "delegate 0 (ipam)")
	assert.Equal(t, []string{"GC portmap"}, h.exec.seen())
}

// TestAutoWithoutProber: an engine that cannot ask VERSION refuses an auto
// delegate rather than guessing.
func TestAutoWithoutProber(t *testing.T) {
	h := newHarness()
	r := req(chainConf(t, "1.1.0", dIPAMAuto), "c1")
	_, err := h.eng.Add(context.Background(), r)
	require.Error(t, err)
	assert.Equal(t, uint(types.ErrIncompatibleCNIVersion), cniCode(t, err))
	assert.Empty(t, h.exec.seen())
	h.noRecord(t, r)
}
