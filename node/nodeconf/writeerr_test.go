package nodeconf

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncSaysConfDirNotWritable: a conf dir the agent cannot write (here
// a read-only fs, EPERM) leaves the generated file as it was, and the
// error names the file, the primary and what to do.
func TestSyncSaysConfDirNotWritable(t *testing.T) {
	inst, _ := newTestInstaller(t, map[string]string{"10-a.conflist": bridgeCL})
	mustSync(t, inst)
	good := generatedFile(t, inst)
	require.NoError(t, afero.WriteFile(inst.Fs, filepath.Join(confDir, "10-a.conflist"), []byte(bridgeCL[:len(bridgeCL)-2]+`,{"type":"tuning"}]}`), 0o644))
	inst.Fs = afero.NewReadOnlyFs(inst.Fs)
	st, err := inst.Sync(context.Background())
	require.Error(t, err)
	assert.False(t, st.Ready)
	for _, want := range []string{"cannot write /etc/cni/net.d/00-catena.conflist (wrapping 10-a.conflist)", "operation not permitted",
		"00-catena.conflist is left as it was, and does not follow 10-a.conflist until catena-agent can write the conf dir /etc/cni/net.d",
		"mount it read-write (the DaemonSet's hostPath), and run catena-agent as root or the dir's owner"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, good, generatedFile(t, inst))
}
