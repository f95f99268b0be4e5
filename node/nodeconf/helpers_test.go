package nodeconf

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
)

const (
	confDir  = "/etc/cni/net.d"
	ownName  = "00-catena.conflist"
	bridgeCL = `{"cniVersion":"1.0.0","name":"podnet","disableCheck":true,"plugins":[
 {"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.22.0.0/16"}]]}},
 {"type":"portmap","capabilities":{"portMappings":true,"ips":false}},
 {"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
)

// newTestInstaller returns an Installer on a MemMapFs holding files in the
// conf dir, and the buffer its log goes to.
func newTestInstaller(t *testing.T, files map[string]string) (*Installer, *bytes.Buffer) {
	t.Helper()
	fsys := afero.NewMemMapFs()
	require.NoError(t, fsys.MkdirAll(confDir, 0o755))
	for name, data := range files {
		require.NoError(t, afero.WriteFile(fsys, filepath.Join(confDir, name), []byte(data), 0o644))
	}
	var logs bytes.Buffer
	return &Installer{
		Fs:  fsys,
		Cfg: Config{ConfDir: confDir, ConfName: ownName, Catena: CatenaOptions{CacheDir: "/var/lib/cni/catena"}},
		Log: slog.New(slog.NewTextHandler(&logs, nil)),
	}, &logs
}

// generatedFile returns the generated file's bytes, or nil if absent.
func generatedFile(t *testing.T, i *Installer) []byte {
	t.Helper()
	data, err := afero.ReadFile(i.Fs, filepath.Join(i.Cfg.ConfDir, i.Cfg.ConfName))
	if err != nil {
		return nil
	}
	return data
}

func mustSync(t *testing.T, i *Installer) Status {
	t.Helper()
	st, err := i.Sync(context.Background())
	require.NoError(t, err)
	require.True(t, st.Ready, st.Reason)
	return st
}
