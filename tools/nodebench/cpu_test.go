package nodebench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// perfReport is what perf report prints with PerfReportArgs, abridged.
const perfReport = `# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 1089  of event 'cpu-clock:ppp'
#
#      Samples  Command
# ............  ...............
#
           495  swapper
           297  containerd
            99  catena
            99  kworker/0:1
            99  kworker/1:2H


#
# (Tip: To see callchains in a more compact form: perf report -g folded)
#
`

func TestParsePerfComm(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]float64
		err      string
	}{
		{name: "report", in: perfReport, want: map[string]float64{"swapper": 5, "containerd": 3, "catena": 1, "kworker": 2}},
		{name: "a command with spaces", in: "  99 kube-apiserver x\n", want: map[string]float64{"kube-apiserver x": 1}},
		{name: "no samples", in: "# Samples: 0\n\n", err: "no samples"},
		{name: "not a count", in: "  many  swapper\n", err: "not a sample count"},
		{name: "no command", in: "  99\n", err: "not a sample count"},
		{name: "negative", in: "  -1 swapper\n", err: "not a sample count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePerfComm(strings.NewReader(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.InDeltaMapValues(t, tc.want, got, 1e-9)
		})
	}
}

func TestReportCPU(t *testing.T) {
	names := Names{Primary: "flannel", Catena: "Catena over flannel"}
	rounds := sampleRounds()
	var b bytes.Buffer
	require.NoError(t, ReportCPU(&b, rounds, names, 0.01))
	assert.Empty(t, b.String(), "no round profiled, no table")

	// N=3: two rounds of each; Catena adds 30 ms of catena per pod and
	// 3 ms more containerd; a command under 1% of both is left out.
	cpu := []map[string]float64{
		{"swapper": 3, "containerd": 0.6, "kubelet": 0.3, "tiny": 0.001},
		{"swapper": 2.7, "containerd": 0.6, "kubelet": 0.3, "catena": 0.09, "tiny": 0.001},
		{"swapper": 2.7, "containerd": 0.618, "kubelet": 0.3, "catena": 0.09},
		{"swapper": 3, "containerd": 0.6, "kubelet": 0.3},
	}
	for i := range cpu {
		rounds[i].CPU = cpu[i]
	}
	require.NoError(t, ReportCPU(&b, rounds, names, 0.01, "catena-agent"))
	var rows []string
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		require.True(t, strings.HasPrefix(line, Prefix), "%q", line)
		rows = append(rows, spaces.ReplaceAllString(strings.TrimPrefix(line, Prefix), " "))
	}
	assert.Equal(t, []string{
		"CPU N=3, perf record -a -F 99 over each round (scale up to gone); ms of CPU per pod, mean of 2 rounds of flannel and 2 of Catena over flannel; commands over 1% of either's busy time, and catena-agent",
		"| command | flannel | Catena over flannel | difference |",
		"|--- |--- |--- |--- |",
		"| busy (all but idle) | 300.2 | 333.2 | +33.0 |",
		"| idle | 1000.0 | 900.0 | -100.0 |",
		"| catena | 0.0 | 30.0 | +30.0 |",
		"| containerd | 200.0 | 203.0 | +3.0 |",
		"| catena-agent | 0.0 | 0.0 | +0.0 |",
		"| kubelet | 100.0 | 100.0 | +0.0 |",
	}, rows, "N=2 was not profiled: no table for it")
}
