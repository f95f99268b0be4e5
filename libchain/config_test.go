package libchain

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseConfigDefaults(t *testing.T) {
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"podnet","type":"catena",
	  "capabilities":{"portMappings":true},
	  "delegates":[{"type":"bridge","bridge":"cni0","ipam":{"type":"host-local"}},{"type":"portmap","cniVersion":"0.4.0","capabilities":{"portMappings":true}}]}`))
	require.NoError(t, err)
	assert.Equal(t, DefaultCacheDir, conf.CacheDir)
	assert.Empty(t, conf.LibcniResultsDir, "no adoption at DEL unless asked")
	assert.Equal(t, 30*time.Second, conf.LockTimeout)
	assert.Equal(t, 60*time.Second, conf.DelegateTimeout)
	require.Len(t, conf.Delegates, 2)
	assert.Equal(t, "1.1.0", conf.Delegates[0].CNIVersion)
	assert.Equal(t, "0.4.0", conf.Delegates[1].CNIVersion)
	assert.True(t, conf.Delegates[1].Capabilities["portMappings"])
	assert.Equal(t, "delegate 0 (bridge)", conf.Delegates[0].String())
}

func TestParseConfigErrors(t *testing.T) {
	tooMany := `{"cniVersion":"1.0.0","name":"n","delegates":[` + strings.Repeat(`{"type":"x"},`, MaxDelegates) + `{"type":"x"}]}`
	tests := []struct {
		name, conf, field string
		code              uint
	}{
		{"malformed JSON", `{"name":`, "decoding", types.ErrDecodingFailure},
		{"no delegates", `{"cniVersion":"1.0.0","name":"n","type":"catena"}`, "delegates", types.ErrInvalidNetworkConfig},
		{"empty delegates", `{"cniVersion":"1.0.0","name":"n","delegates":[]}`, "delegates", types.ErrInvalidNetworkConfig},
		{"delegate without type", `{"cniVersion":"1.0.0","name":"n","delegates":[{"bridge":"x"}]}`, "delegates[0].type", types.ErrInvalidNetworkConfig},
		{"delegate type with slash", `{"cniVersion":"1.0.0","name":"n","delegates":[{"type":"bridge"},{"type":"../../bin/sh"}]}`, "delegates[1].type", types.ErrInvalidNetworkConfig},
		{"delegate type dot-dot", `{"cniVersion":"1.0.0","name":"n","delegates":[{"type":".."}]}`, "delegates[0].type", types.ErrInvalidNetworkConfig},
		{"delegate type not a string", `{"cniVersion":"1.0.0","name":"n","delegates":[{"type":3}]}`, "delegates[0].type", types.ErrInvalidNetworkConfig},
		{"delegate not an object", `{"cniVersion":"1.0.0","name":"n","delegates":["bridge"]}`, "delegates[0]", types.ErrInvalidNetworkConfig},
		{"network name escapes", `{"cniVersion":"1.0.0","name":"../x","delegates":[{"type":"bridge"}]}`, "name", types.ErrInvalidNetworkConfig},
		{"missing name", `{"cniVersion":"1.0.0","delegates":[{"type":"bridge"}]}`, "name", types.ErrInvalidNetworkConfig},
		{"bad lockTimeout", `{"cniVersion":"1.0.0","name":"n","lockTimeout":"soon","delegates":[{"type":"bridge"}]}`, "lockTimeout", types.ErrInvalidNetworkConfig},
		{"negative delegateTimeout", `{"cniVersion":"1.0.0","name":"n","delegateTimeout":"-1s","delegates":[{"type":"bridge"}]}`, "delegateTimeout", types.ErrInvalidNetworkConfig},
		{"relative cacheDir", `{"cniVersion":"1.0.0","name":"n","cacheDir":"state","delegates":[{"type":"bridge"}]}`, "cacheDir", types.ErrInvalidNetworkConfig},
		{"relative libcniResultsDir", `{"cniVersion":"1.0.0","name":"n","libcniResultsDir":"results","delegates":[{"type":"bridge"}]}`, "libcniResultsDir", types.ErrInvalidNetworkConfig},
		{"bad cniVersion", `{"cniVersion":"one","name":"n","delegates":[{"type":"bridge"}]}`, "cniVersion", types.ErrIncompatibleCNIVersion},
		{"bad delegate cniVersion", `{"cniVersion":"1.0.0","name":"n","delegates":[{"type":"bridge","cniVersion":"x.y"}]}`, "delegates[0].cniVersion", types.ErrIncompatibleCNIVersion},
		{"delegate cniVersion catena cannot convert to", `{"cniVersion":"1.0.0","name":"n","delegates":[{"type":"bridge","cniVersion":"7.0.0"}]}`, "delegates[0].cniVersion", types.ErrIncompatibleCNIVersion},
		{"delegate cniVersion between releases", `{"cniVersion":"1.0.0","name":"n","delegates":[{"type":"bridge"},{"type":"x","cniVersion":"1.0.1"}]}`, "delegates[1].cniVersion", types.ErrIncompatibleCNIVersion},
		{"cniVersion catena cannot convert to", `{"cniVersion":"7.0.0","name":"n","delegates":[{"type":"bridge"}]}`, "cniVersion", types.ErrIncompatibleCNIVersion},
		{"too many delegates", tooMany, "delegates: 65 delegates, at most 64", types.ErrInvalidNetworkConfig},
		{"bad capabilities", `{"cniVersion":"1.0.0","name":"n","delegates":[{"type":"portmap","capabilities":["portMappings"]}]}`, "delegates[0].capabilities", types.ErrInvalidNetworkConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.conf))
			require.Error(t, err)
			var te *types.Error
			require.True(t, errors.As(err, &te))
			assert.Equal(t, tt.code, te.Code)
			assert.Contains(t, te.Msg, tt.field)
		})
	}
}

func TestParseConfigLibcniResultsDir(t *testing.T) {
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"n","libcniResultsDir":"/var/lib/cni/results","delegates":[{"type":"bridge"}]}`))
	require.NoError(t, err)
	assert.Equal(t, "/var/lib/cni/results", conf.LibcniResultsDir)
}

// TestParseConfigDelegateLimit: a chain of exactly MaxDelegates parses.
func TestParseConfigDelegateLimit(t *testing.T) {
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"n","delegates":[` +
		strings.TrimSuffix(strings.Repeat(`{"type":"x"},`, MaxDelegates), ",") + `]}`))
	require.NoError(t, err)
	assert.Len(t, conf.Delegates, MaxDelegates)
}
