//go:build linux

package cache

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/integration/schema1"
)

// Tests of the records catena 1daa3b7 wrote (schema 1 only; see
// integration/schema1): this build must read, rewrite and list them.

// schema1Store copies the old build's records into a fresh cache dir on
// the real disk and returns a store over it.
func schema1Store(t *testing.T) (*DiskStore, string) {
	t.Helper()
	s, dir := newOsStore(t)
	require.NoError(t, schema1.Copy(dir))
	return s, dir
}

func schema1Key(containerID string) Key {
	return Key{Network: schema1.Network, ContainerID: containerID, IfName: schema1.IfName}
}

// oldStep is what a step of an old record says.
type oldStep struct {
	typ, version string
	state        StepState
}

// TestSchema1RecordsLoad: each record loads as the old build last wrote
// it: phase, versions, every step's state, cached config and result, the
// teardown bookkeeping, and no netns identity (that build had none).
func TestSchema1RecordsLoad(t *testing.T) {
	bridge, portmap, tuning := oldStep{"bridge", "1.1.0", StepAdded}, oldStep{"portmap", "1.1.0", StepAdded}, oldStep{"tuning", "1.1.0", StepAdded}
	tests := []struct {
		id       string
		phase    Phase
		version  string
		steps    []oldStep
		entries  int // entries: one full snapshot per write
		attempts int
		addError string
		lastErr  string
		added    bool // the ADD completed: the record keeps its final result
	}{
		{id: "s1-a-complete", phase: PhaseComplete, version: "1.1.0", steps: []oldStep{bridge, portmap, tuning}, entries: 4, added: true},
		{id: "s1-d-v040-complete", phase: PhaseComplete, version: "0.4.0", entries: 4, added: true, steps: []oldStep{
			{"bridge", "0.4.0", StepAdded}, {"portmap", "1.0.0", StepAdded}, {"tuning", "0.4.0", StepAdded}}},
		{id: "s1-e-crashed-add", phase: PhaseAdding, version: "1.1.0", entries: 3, steps: []oldStep{
			bridge, portmap, {"tuning", "1.1.0", StepStarting}}},
		{id: "s1-f-crashed-rollback", phase: PhaseTearingDown, version: "1.1.0", entries: 4, attempts: 1,
			addError: "failer: injected ADD failure", steps: []oldStep{bridge, portmap, {"failer", "1.1.0", StepDeleted}}},
		{id: "s1-c-del-failed", phase: PhaseNeedsTeardown, version: "1.1.0", entries: 6, attempts: 1, added: true,
			lastErr: "failer: injected DEL failure", steps: []oldStep{
				bridge, portmap, {"failer", "1.1.0", StepDelFailed}, {"tuning", "1.1.0", StepDeleted}}},
		{id: "s1-b-rollback-failed", phase: PhaseNeedsTeardown, version: "1.1.0", entries: 6, attempts: 1,
			addError: "failer: injected ADD failure", lastErr: "failer: injected DEL failure", steps: []oldStep{
				bridge, portmap, {"failer", "1.1.0", StepDelFailed}, {"failer", "1.1.0", StepDeleted}}},
	}
	require.Len(t, tests, len(schema1.Attachments), "every checked-in record is asserted")
	s, _ := schema1Store(t)
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			att := schema1.ByID(tc.id)
			raw, err := schema1.Raw(tc.id)
			require.NoError(t, err)
			lines := bytes.SplitAfter(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
			require.Len(t, lines, tc.entries)
			for i, l := range lines {
				require.True(t, bytes.HasPrefix(l, []byte(`{"schema":1,"sha256":"`)), "line %d is a schema-1 snapshot", i+1)
			}

			rec, err := s.Load(schema1Key(tc.id))
			require.NoError(t, err)
			assert.Equal(t, 1, rec.Schema)
			assert.Equal(t, schema1Key(tc.id), rec.Key)
			assert.Equal(t, tc.phase, rec.Phase)
			assert.Equal(t, tc.version, rec.CNIVersion)
			assert.Equal(t, att.NetNS, rec.NetNS)
			assert.Nil(t, rec.NetNSID, "the old build recorded no netns identity")
			assert.Contains(t, rec.Args, "K8S_POD_NAMESPACE=upgrade")
			assert.Equal(t, tc.attempts, rec.TeardownAttempts)
			assert.Contains(t, rec.AddError, tc.addError)
			assert.Contains(t, rec.LastError, tc.lastErr)
			assert.False(t, rec.Created.IsZero())
			assert.False(t, rec.Updated.Before(rec.Created))
			require.Len(t, rec.Steps, len(tc.steps))
			for i, want := range tc.steps {
				st := rec.Steps[i]
				assert.Equal(t, i, st.Index)
				assert.Equal(t, want, oldStep{st.Type, st.CNIVersion, st.State}, "step %d", i)
				var conf map[string]any
				require.NoError(t, json.Unmarshal(st.Config, &conf), "step %d config", i)
				assert.Equal(t, map[string]any{"type": want.typ, "cniVersion": want.version, "name": schema1.Network},
					map[string]any{"type": conf["type"], "cniVersion": conf["cniVersion"], "name": conf["name"]}, "step %d config", i)
				assert.NotContains(t, conf, "prevResult", "the config is cached without prevResult")
				assert.True(t, st.DelFailedSince.IsZero(), "a field the old build did not have")
				if st.State == StepDelFailed {
					assert.Equal(t, 1, st.DelAttempts)
					assert.Contains(t, st.DelError, "injected DEL failure")
				}
			}
			assert.Contains(t, string(rec.Steps[0].Config), `"bridge":"`+schema1.Bridge+`"`)
			assert.Contains(t, string(rec.Steps[0].Config), `"dataDir":"`+schema1.IPAMDir+`"`)
			assert.Contains(t, string(rec.Steps[0].Result), `"address":"`+att.IP+`"`, "bridge's result holds the IP")
			assert.Contains(t, string(rec.Steps[1].Config), `"hostPort":`+jsonInt(att.HostPort), "portmap's runtimeConfig is cached")
			if tc.added {
				assert.Contains(t, string(rec.Result), `"cniVersion":"`+tc.version+`"`)
				assert.Contains(t, string(rec.Result), att.IP)
			} else {
				assert.Empty(t, rec.Result)
			}
		})
	}
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestSchema1SaveAfterLoad: this build appends its own entries to an old
// record's file (as a DEL or a retry that fails does) and the record
// loads back as saved, from the store that wrote it and from a fresh one
// (another catena process), twice over (the second write is the one a
// delta can carry).
func TestSchema1SaveAfterLoad(t *testing.T) {
	s, dir := schema1Store(t)
	for _, att := range schema1.Attachments {
		t.Run(att.ContainerID, func(t *testing.T) {
			key := schema1Key(att.ContainerID)
			rec, err := s.Load(key)
			require.NoError(t, err)
			for round := 1; round <= 2; round++ {
				last := len(rec.Steps) - 1
				rec.Phase, rec.TeardownAttempts, rec.LastError = PhaseNeedsTeardown, rec.TeardownAttempts+1, "round"
				rec.Steps[last].State, rec.Steps[last].DelAttempts = StepDelFailed, rec.Steps[last].DelAttempts+1
				rec.Steps[last].DelFailedSince = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
				require.NoError(t, s.Save(rec))

				got, err := s.Load(key)
				require.NoError(t, err)
				assert.Equal(t, rec, got, "round %d, same store", round)
				fresh, err := NewDiskStore(afero.NewOsFs(), dir, NewMemLocker()).Load(key)
				require.NoError(t, err)
				assert.Equal(t, rec, fresh, "round %d, fresh store", round)
			}
		})
	}
}

// TestSchema1ListAndPending: the store lists every old record, and the old
// build's empty pending markers read as due at once, with no attempts.
func TestSchema1ListAndPending(t *testing.T) {
	s, _ := schema1Store(t)
	keys, err := s.List()
	require.NoError(t, err)
	var want, pending []Key
	for _, att := range schema1.Attachments {
		want = append(want, schema1Key(att.ContainerID))
		if att.Pending {
			pending = append(pending, schema1Key(att.ContainerID))
		}
	}
	assert.ElementsMatch(t, want, keys)

	found, err := s.PendingTeardown(schema1.Network, 10)
	require.NoError(t, err)
	var got []Key
	for _, p := range found {
		got = append(got, p.Key)
		assert.NoError(t, p.Bad, p.Key.String())
		assert.Equal(t, dueAtOnce(), p.Note, p.Key.String())
	}
	assert.ElementsMatch(t, pending, got)
	for _, att := range schema1.Attachments {
		_, ok, err := s.PendingNoteOf(schema1Key(att.ContainerID))
		require.NoError(t, err)
		assert.Equal(t, att.Pending, ok, att.ContainerID)
	}
}
