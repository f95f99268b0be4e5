package libchain

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInRootCgroup: only a process in the root cgroup of every hierarchy
// is taken for one that is not a pod's; anything else, or nothing to read,
// is not.
func TestInRootCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup string
		want         bool
	}{
		{"cgroup v2, root", "0::/\n", true},
		{"cgroup v1 and v2, all root", "9:name=systemd:/\n4:memory:/\n1:cpu:/\n0::/\n", true},
		{"cgroup v2, a pod's", "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-abc.scope\n", false},
		{"cgroup v1, one hierarchy not root", "4:memory:/k8s.io/abc\n1:cpu:/\n0::/\n", false},
		{"empty", "", false},
		{"garbage", "nonsense\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(proc, "42"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(proc, "42", "cgroup"), []byte(tc.cgroup), 0o600))
			assert.Equal(t, tc.want, ProcScanner{Proc: proc}.inRootCgroup(42))
		})
	}
	assert.False(t, ProcScanner{Proc: t.TempDir()}.inRootCgroup(42), "no such process")
}

// TestScanIncomplete: a look that cannot tell it is in the host's PID
// namespace, or that meets a process it cannot read outside the root
// cgroup, is incomplete, and says why.
func TestScanIncomplete(t *testing.T) {
	proc := t.TempDir()
	procs, err := ProcScanner{Proc: proc}.Scan()
	require.NoError(t, err)
	assert.Contains(t, procs.Incomplete, "PID namespace cannot be read")

	require.NoError(t, os.MkdirAll(filepath.Join(proc, "self", "ns"), 0o700))
	require.NoError(t, os.Symlink("pid:[4026532000]", filepath.Join(proc, "self", "ns", "pid")))
	procs, err = ProcScanner{Proc: proc}.Scan()
	require.NoError(t, err)
	assert.Contains(t, procs.Incomplete, "not in the host's PID namespace")

	_, err = ProcScanner{Proc: filepath.Join(proc, "none")}.Scan()
	assert.Error(t, err, "no procfs at all")
}
