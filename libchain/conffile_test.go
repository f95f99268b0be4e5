package libchain

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadConfFile(t *testing.T) {
	tests := []struct {
		name, data, wantErr string
		wantVersion         string
	}{
		{name: "conflist entry inherits name and version",
			data:        `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"loopback"},{"type":"catena","delegates":[{"type":"bridge"}]}]}`,
			wantVersion: "1.1.0"},
		{name: "conflist entry inherits the version libcni picks of cniVersions",
			data:        `{"cniVersion":"0.4.0","cniVersions":["1.0.0","1.1.0","9.0.0"],"name":"podnet","plugins":[{"type":"catena","delegates":[{"type":"bridge"}]}]}`,
			wantVersion: "1.1.0"},
		{name: "single conf",
			data:        `{"cniVersion":"1.0.0","name":"podnet","type":"catena","delegates":[{"type":"bridge"}]}`,
			wantVersion: "1.0.0"},
		{name: "conflist without catena", data: `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"bridge"}]}`, wantErr: "no catena entry"},
		{name: "single conf of another type", data: `{"cniVersion":"1.1.0","name":"podnet","type":"bridge"}`, wantErr: "not catena"},
		{name: "not JSON", data: `{`, wantErr: "not a network config"},
		{name: "invalid catena entry", data: `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"catena"}]}`, wantErr: "delegates"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "10-podnet.conflist")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))
			conf, err := LoadConfFile(path)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "podnet", conf.Name)
			assert.Equal(t, tc.wantVersion, conf.CNIVersion)
			assert.Equal(t, "bridge", conf.Delegates[0].Type)
		})
	}
	_, err := LoadConfFile(filepath.Join(t.TempDir(), "missing.conflist"))
	require.Error(t, err)
}
