//go:build linux

package invoke

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeProbe installs an executable "probe" in dir that appends tag to
// marker when it runs.
func writeProbe(t *testing.T, dir, marker, tag string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	writeScript(t, dir, "probe", "echo "+tag+" >> "+marker+"\n")
}

// TestCNIPathOnlyAbsoluteDirs: a delegate is found only in an absolute
// directory of CNI_PATH, and the path found is what runs. An empty, "." or
// relative element is ignored: it used to make FindInPath return a bare
// or relative name, which exec then resolved through $PATH or the working
// directory (/usr/bin/id ran as a delegate).
func TestCNIPathOnlyAbsoluteDirs(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(root, "ran")
	cwd, viaPATH, abs := filepath.Join(root, "cwd"), filepath.Join(root, "path"), filepath.Join(root, "abs")
	writeProbe(t, cwd, marker, "cwd")
	writeProbe(t, filepath.Join(cwd, "bin"), marker, "cwd-bin")
	writeProbe(t, viaPATH, marker, "PATH")
	writeProbe(t, abs, marker, "abs")
	empty := filepath.Join(root, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	t.Chdir(cwd)
	t.Setenv("PATH", viaPATH)

	tests := []struct {
		name, cniPath string
		wantRan       string // "" = nothing ran, and the call failed
	}{
		{"empty element", ":" + empty, ""},
		{"dot element", ".:" + empty, ""},
		{"relative element", "bin:" + empty, ""},
		{"only empty elements", "::", ""},
		{"absolute dir after an empty element", "::" + abs, "abs\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(func() { require.NoError(t, os.RemoveAll(marker)) })
			err := NewExec(nil).Run(context.Background(), Call{Verb: "DEL", Type: "probe",
				Config: []byte(`{"cniVersion":"1.0.0","name":"n","type":"probe"}`),
				Args:   RuntimeArgs{ContainerID: "c1", IfName: "eth0", Path: tt.cniPath}})
			ran, rerr := os.ReadFile(marker)
			if tt.wantRan == "" {
				var te *types.Error
				require.ErrorAs(t, err, &te)
				assert.Contains(t, []uint{types.ErrPluginNotAvailable, types.ErrInvalidEnvironmentVariables}, te.Code, te.Msg)
				assert.ErrorIs(t, rerr, os.ErrNotExist, "nothing ran, yet %q did", ran)
				return
			}
			require.NoError(t, err)
			require.NoError(t, rerr)
			assert.Equal(t, tt.wantRan, string(ran))
		})
	}
}

// TestProcExecRefusesRelativePath: ProcExec runs only an absolute path,
// whoever found it.
func TestProcExecRefusesRelativePath(t *testing.T) {
	_, err := (&ProcExec{}).ExecPlugin(context.Background(), "id", nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not an absolute path")
}
