package libcnientry

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
)

// FuzzBuildRecord feeds arbitrary libcni cache entries through the parse
// and the record build that adoption runs on the runtime's files: nothing
// panics, and whatever is accepted is a record Catena can store, load back
// and hand to a delegate (valid key, plain delegate types, no NUL in what
// becomes the environment, a result on the last step).
func FuzzBuildRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":"c1","ifName":"eth0","networkName":"podnet",` +
		`"config":"eyJjbmlWZXJzaW9uIjoiMS4wLjAiLCJuYW1lIjoicG9kbmV0IiwicGx1Z2lucyI6W3sidHlwZSI6ImJyaWRnZSJ9XX0=",` +
		`"cniArgs":[["K8S_POD_NAME","a"]],"result":{"cniVersion":"1.0.0","ips":[{"address":"10.1.0.2/24"}]}}`))
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":"c1","ifName":"eth0","networkName":"podnet","cniArgs":[["A","\u0000"]]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e := &entry{modTime: time.Unix(1, 0)}
		if json.Unmarshal(data, e) != nil {
			return
		}
		rec, err := buildRecord(e, nil)
		if err != nil {
			return
		}
		require.NoError(t, rec.Key.Validate())
		require.NotEmpty(t, rec.Steps)
		require.NotEmpty(t, rec.Steps[len(rec.Steps)-1].Result)
		require.NotContains(t, rec.Args, "\x00")
		require.NotContains(t, rec.NetNS, "\x00")
		for _, s := range rec.Steps {
			require.NoError(t, checkType(s.Type), "step %d", s.Index)
			require.Equal(t, cache.StepAdded, s.State)
			require.True(t, json.Valid(s.Config), "step %d config", s.Index)
			require.False(t, strings.Contains(s.Type, "/"))
		}
		enc, err := cache.Encode(rec)
		require.NoError(t, err)
		back, err := cache.Decode(enc)
		require.NoError(t, err)
		require.Equal(t, rec.Key, back.Key)
		require.Len(t, back.Steps, len(rec.Steps))
	})
}
