package nodebench

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readyPods are pods created at t0 and Ready after each of ready ms.
func readyPods(ready ...int) []Pod {
	var out []Pod
	for i, r := range ready {
		out = append(out, Pod{Name: "density-" + string(rune('a'+i)), Created: at(0), Ready: at(r)})
	}
	return out
}

// round is a round of v at n whose pods were Ready after ready ms, with
// a kubelet histogram of sli observations in (0.5 s, 1 s] and, in
// Catena's, ADDs of add ms.
func round(v Variant, n, index int, load float64, sli int, add []int, ready ...int) Round {
	pods := readyPods(ready...)
	d := PodDists(pods)
	d[KubeletStartSLI.ID] = Dist{hist: &Hist{bounds: []float64{0.5, 1, inf}, cumulative: []float64{0, float64(sli), float64(sli)}}}
	if v == Catena {
		d[CatenaAdd.ID] = Dist{samples: ms(add...)}
	}
	return Round{Variant: v, N: n, Index: index, Pods: pods, Dists: d, Load: load}
}

// sampleRounds are A B B A at N=3, Catena 20% slower to Ready at p50,
// then one A B at N=2.
func sampleRounds() []Round {
	return []Round{
		round(Primary, 3, 0, 1.0, 3, nil, 100, 200, 300),
		round(Catena, 3, 1, 2.5, 3, []int{40, 50, 60}, 120, 240, 360),
		round(Catena, 3, 2, 4.0, 3, []int{45, 55, 65}, 130, 250, 370),
		round(Primary, 3, 3, 3.0, 3, nil, 110, 210, 310),
		round(Primary, 2, 4, 0.5, 2, nil, 100, 100),
		round(Catena, 2, 5, 0.7, 2, []int{40, 40}, 150, 150),
	}
}

var spaces = regexp.MustCompile(` +`)

func TestReport(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Report(&b, sampleRounds(), Names{Primary: "flannel", Catena: "Catena over flannel"}))
	out := b.String()
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		assert.True(t, strings.HasPrefix(line, Prefix), "%q", line)
	}
	flat := spaces.ReplaceAllString(out, " ")
	for _, want := range []string{
		"NODE-DENSITY N=3, rounds: 2 of flannel, 2 of Catena over flannel, alternated;",
		"ratio: Catena over flannel / flannel;",
		"load average 1.0-4.0",
		// pooled [100 110 200 210 300 310] and [120 130 240 250 360 370]
		"| created -> Ready | 6 | 200.0 / 310.0 / 310.0 | 200.0-210.0 | 6 | 240.0 / 370.0 / 370.0 | 240.0-250.0 | 1.20 / 1.19 / 1.19 | 1.14-1.25 |",
		// 6 observations in (0.5, 1]: rank 3 is halfway
		"| kubelet pod start SLI (hist) | 6 | 750.0 / 950.0 / 995.0 | 750.0-750.0 | 6 | 750.0 / 950.0 / 995.0 | 750.0-750.0 | 1.00 / 1.00 / 1.00 | 1.00-1.00 |",
		"| Catena ADD (journal) | - | - | - | 6 | 50.0 / 65.0 / 65.0 | 50.0-55.0 | - | - |",
		"NODE-DENSITY N=2, rounds: 1 of flannel, 1 of Catena over flannel",
		"| created -> Ready | 2 | 100.0 / 100.0 / 100.0 | 100.0-100.0 | 2 | 150.0 / 150.0 / 150.0 | 150.0-150.0 | 1.50 / 1.50 / 1.50 | - |",
	} {
		assert.Contains(t, flat, want)
	}
	assert.NotContains(t, out, deleteGone.Label, "a measure no round measured is left out")
	assert.Less(t, strings.Index(out, "N=3,"), strings.Index(out, "N=2,"), "the N in the order they ran")
}

func TestReportRefusesMixedDists(t *testing.T) {
	rounds := sampleRounds()
	rounds[3].Dists[KubeletStartSLI.ID] = Dist{samples: ms(1)}
	err := Report(&bytes.Buffer{}, rounds, Names{Primary: "p", Catena: "c"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubelet pod start SLI (hist) of primary at N=3: merge: samples and a histogram")
	require.Error(t, writeCSV(&bytes.Buffer{}, rounds))
}

func readCSV(t *testing.T, raw []byte) [][]string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	require.NoError(t, err)
	return rows
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeCSV(&b, sampleRounds()))
	rows := readCSV(t, b.Bytes())
	require.NotEmpty(t, rows)
	assert.Equal(t, []string{"n", "variant", "measure", "rounds", "count", "p50_ms", "p90_ms", "p99_ms",
		"round_p50_min_ms", "round_p50_max_ms", "ratio_p50", "ratio_p90", "ratio_p99", "ratio_p50_lo95", "ratio_p50_hi95"}, rows[0])
	byKey := map[string][]string{}
	for _, r := range rows[1:] {
		byKey[r[0]+" "+r[1]+" "+r[2]] = r
	}
	// per N: created_ready, sandbox_ready_ready... only those measured:
	// created_ready and the SLI for both variants, catena_add for Catena
	assert.Len(t, rows[1:], 2*(2+2+1))
	assert.Equal(t, []string{"3", "primary", "created_ready", "2", "6", "200.0", "310.0", "310.0", "200.0", "210.0", "", "", "", "", ""}, byKey["3 primary created_ready"])
	assert.Equal(t, []string{"3", "catena", "created_ready", "2", "6", "240.0", "370.0", "370.0", "240.0", "250.0", "1.200", "1.194", "1.194", "1.143", "1.250"}, byKey["3 catena created_ready"])
	assert.Equal(t, []string{"2", "catena", "catena_add", "1", "2", "40.0", "40.0", "40.0", "40.0", "40.0", "", "", "", "", ""}, byKey["2 catena catena_add"])
}

func TestWritePodsCSV(t *testing.T) {
	rounds := []Round{{Variant: Catena, N: 2, Index: 1, Pods: []Pod{
		{Name: "density-a", Created: at(0), Scheduled: at(5), SandboxReady: at(200), Ready: at(250), Deleting: at(1000), Gone: at(2500)},
		{Name: "density-b", Created: at(0), Ready: at(300)},
	}}}
	var b bytes.Buffer
	require.NoError(t, writePodsCSV(&b, rounds))
	assert.Equal(t, [][]string{
		{"n", "variant", "round", "pod", "created_scheduled_ms", "scheduled_sandbox_ready_ms", "sandbox_ready_ready_ms", "created_ready_ms", "delete_gone_ms"},
		{"2", "catena", "1", "density-a", "5.000", "195.000", "50.000", "250.000", "1500.000"},
		{"2", "catena", "1", "density-b", "", "", "", "300.000", ""},
	}, readCSV(t, b.Bytes()))
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	out, docs := filepath.Join(dir, "bin"), filepath.Join(dir, "docs")
	paths, err := WriteFiles(out, docs, BaseName, sampleRounds(), Names{Primary: "flannel", Catena: "Catena over flannel"})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(out, "node-density.csv"), filepath.Join(out, "node-density-pods.csv"),
		filepath.Join(out, "node-density.png"), filepath.Join(docs, "node-density.png")}, paths)
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		if strings.HasSuffix(p, ".png") {
			assert.Equal(t, []byte("\x89PNG\r\n\x1a\n"), raw[:8], p)
		} else {
			assert.Greater(t, len(readCSV(t, raw)), 1, p)
		}
	}

	paths, err = WriteFiles(filepath.Join(dir, "only"), "", CRIOBaseName, sampleRounds(), Names{Primary: "p", Catena: "c"})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "only", "node-density-crio.csv"), filepath.Join(dir, "only", "node-density-crio-pods.csv"),
		filepath.Join(dir, "only", "node-density-crio.png")}, paths, "no docs copy unless asked")
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b time.Duration
		want float64
	}{
		{12, 10, 1.2},
		{5, 10, 0.5},
		{5, 0, 0},
	}
	for _, tc := range tests {
		assert.InDelta(t, tc.want, Ratio(tc.a, tc.b), 1e-9, "%v/%v", tc.a, tc.b)
	}
}

func TestReportNoRatioToZero(t *testing.T) {
	// kubelet often reports sandbox ready and Ready in one status update
	rounds := []Round{
		{Variant: Primary, N: 1, Dists: map[string]Dist{sandboxReady.ID: {samples: ms(0)}}},
		{Variant: Catena, N: 1, Index: 1, Dists: map[string]Dist{sandboxReady.ID: {samples: ms(5)}}},
	}
	var b bytes.Buffer
	require.NoError(t, Report(&b, rounds, Names{Primary: "p", Catena: "c"}))
	assert.Contains(t, spaces.ReplaceAllString(b.String(), " "),
		"| sandbox ready -> Ready | 1 | 0.0 / 0.0 / 0.0 | 0.0-0.0 | 1 | 5.0 / 5.0 / 5.0 | 5.0-5.0 | - / - / - |")
	b.Reset()
	require.NoError(t, writeCSV(&b, rounds))
	rows := readCSV(t, b.Bytes())
	require.Len(t, rows, 3)
	assert.Equal(t, []string{"", "", "", "", ""}, rows[2][10:], "no ratio to 0 ms")
}
