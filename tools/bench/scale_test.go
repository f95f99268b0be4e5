package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// TestSeedRecordIsARealRecord: a seeded record is the template under
// another key, saved and loaded back by the store itself, and never
// aliases the template.
func TestSeedRecordIsARealRecord(t *testing.T) {
	v := &variant{network: "net", cache: t.TempDir()}
	store := cache.NewDiskStore(afero.NewOsFs(), v.cache, cache.NewFlockLocker(filepath.Join(v.cache, "locks")))
	tmpl := &cache.Record{
		Key: cache.Key{Network: "net", ContainerID: "cnitool-0123", IfName: "eth0"}, Phase: cache.PhaseComplete,
		CNIVersion: "1.1.0", NetNS: "/var/run/netns/x", Result: json.RawMessage(`{"cniVersion":"1.1.0"}`),
		Steps: []cache.Step{
			{Index: 0, Type: "bridge", CNIVersion: "1.1.0", Config: json.RawMessage(`{"type":"bridge"}`), State: cache.StepAdded},
			{Index: 1, Type: "portmap", CNIVersion: "1.1.0", Config: json.RawMessage(`{"type":"portmap"}`), State: cache.StepAdded},
		},
		Created: time.Now().UTC(),
	}
	for i := range 3 {
		require.NoError(t, store.Save(seedRecord(tmpl, i)))
	}
	s := seedRecord(tmpl, 7)
	s.Steps[0].State = cache.StepDeleted
	assert.Equal(t, cache.StepAdded, tmpl.Steps[0].State, "the template is not aliased")
	assert.Equal(t, "cnitool-0123", tmpl.Key.ContainerID)

	keys, err := store.List()
	require.NoError(t, err)
	assert.Len(t, keys, 3)
	got, err := store.Load(cache.Key{Network: "net", ContainerID: "seed-000002", IfName: "eth0"})
	require.NoError(t, err)
	assert.Equal(t, cache.PhaseComplete, got.Phase)
	assert.Equal(t, "/var/run/netns/seed-000002", got.NetNS)
	assert.Equal(t, tmpl.Steps, got.Steps)
	n, err := countRecords(v)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

func TestCnitoolContainerID(t *testing.T) {
	id := cnitoolContainerID("/var/run/netns/a")
	assert.Regexp(t, regexp.MustCompile(`^cnitool-[0-9a-f]{20}$`), id)
	assert.NotEqual(t, id, cnitoolContainerID("/var/run/netns/b"))
}
