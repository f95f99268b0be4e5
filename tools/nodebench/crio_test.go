package nodebench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crioLog is CRI-O v1.34's info lines of one pod's start and stop, as it
// writes them, with lines of another pod and of other messages between.
const crioLog = `time="2026-11-28T08:00:00.000000000Z" level=info msg="Running pod sandbox: default/density-a/POD" id=r1 name=/runtime.v1.RuntimeService/RunPodSandbox
time="2026-11-28T08:00:00.050000000Z" level=info msg="Running pod sandbox: default/web-x/POD" id=r2 name=/runtime.v1.RuntimeService/RunPodSandbox
time="2026-11-28T08:00:00.100000000Z" level=info msg="Got pod network &{Name:density-a Namespace:default ID:sb1}"
time="2026-11-28T08:00:00.200000000Z" level=info msg="Adding pod default_density-a to CNI network \"crio-1\" (type=catena)"
time="2026-11-28T08:00:00.250000000Z" level=info msg="Adding pod default_web-x to CNI network \"crio-1\" (type=catena)"
time="2026-11-28T08:00:00.500000000Z" level=info msg="Checking pod default_density-a for CNI network crio-1 (type=catena)"
time="2026-11-28T08:00:00.900000000Z" level=info msg="Ran pod sandbox sb1 with infra container: default/density-a/POD" id=r1 name=/runtime.v1.RuntimeService/RunPodSandbox
time="2026-11-28T08:00:00.950000000Z" level=info msg="Ran pod sandbox sb2 with infra container: default/web-x/POD" id=r2 name=/runtime.v1.RuntimeService/RunPodSandbox
a line that is not logrus's
time="not a time" level=info msg="Stopping pod sandbox: sb1"
time="2026-11-28T08:00:05.000000000Z" level=info msg="Stopping pod sandbox: sb1" id=r3 name=/runtime.v1.RuntimeService/StopPodSandbox
time="2026-11-28T08:00:05.100000000Z" level=info msg="Deleting pod default_density-a from CNI network \"crio-1\" (type=catena)"
time="2026-11-28T08:00:05.400000000Z" level=info msg="Stopped pod sandbox: sb1" id=r3 name=/runtime.v1.RuntimeService/StopPodSandbox
time="2026-11-28T08:00:06.000000000Z" level=info msg="Stopping pod sandbox: sb1" id=r4 name=/runtime.v1.RuntimeService/StopPodSandbox
time="2026-11-28T08:00:06.100000000Z" level=info msg="Stopped pod sandbox (already stopped): sb1" id=r4 name=/runtime.v1.RuntimeService/StopPodSandbox
`

func TestCRIOLog(t *testing.T) {
	l := NewCRIOLog("density-")
	require.NoError(t, l.Read(strings.NewReader(crioLog)))
	assert.Equal(t, 1, l.Pods(), "the other Deployment's pod is not the round's")
	assert.Empty(t, l.Unstopped())
	assert.Equal(t, map[string]Dist{
		CRIOAdd.ID:         {samples: []time.Duration{300 * time.Millisecond}},
		CRIORunSandbox.ID:  {samples: []time.Duration{900 * time.Millisecond}},
		CRIOStopSandbox.ID: {samples: []time.Duration{400 * time.Millisecond}},
	}, l.Dists(), "the first stop counts, the later one that found it stopped does not")

	half := NewCRIOLog("density-")
	require.NoError(t, half.Read(strings.NewReader(crioLog[:strings.Index(crioLog, "a line")])))
	assert.Equal(t, []string{"sb1"}, half.Unstopped(), "ran, not yet stopped")
	assert.Empty(t, half.Dists()[CRIOStopSandbox.ID].samples)
	assert.Len(t, half.Dists()[CRIOAdd.ID].samples, 1)
}

func TestLogfmtValue(t *testing.T) {
	tests := []struct {
		line, key, want string
		ok              bool
	}{
		{`time="t1" msg="a \"b\" c" id=x`, "msg", `a "b" c`, true},
		{`time="t1" msg="a" id=x`, "id", "x", true},
		{`time="t1" xmsg="a"`, "msg", "", false},
		{`time="t1" msg="unterminated`, "msg", "", false},
		{`time=t2 level=info`, "time", "t2", true},
	}
	for _, tc := range tests {
		got, ok := logfmtValue(tc.line, tc.key)
		assert.Equal(t, tc.ok, ok, tc.line)
		assert.Equal(t, tc.want, got, tc.line)
	}
}
