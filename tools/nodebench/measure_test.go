package nodebench

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

func TestJournalDists(t *testing.T) {
	on := func(name string) *events.OpPod { return &events.OpPod{Namespace: "default", Name: name} }
	calls := func(d ...time.Duration) []events.OpCall {
		var out []events.OpCall
		for i, x := range d {
			out = append(out, events.OpCall{Index: i, Duration: x})
		}
		return out
	}
	ops := []events.Op{
		{Verb: "ADD", Outcome: "ok", Duration: 100 * time.Millisecond, Calls: calls(60*time.Millisecond, 30*time.Millisecond), Pod: on("density-1"),
			Writes: 4 * time.Millisecond, WriteCount: 3,
			Process: &events.OpProcess{Startup: 20 * time.Millisecond, CPU: 6 * time.Millisecond, RunDelay: 30 * time.Millisecond}},
		// an ADD of a catena that wrote no process block
		{Verb: "ADD", Outcome: "ok", Duration: 50 * time.Millisecond, Calls: calls(45 * time.Millisecond), Pod: on("density-2"), Writes: 2 * time.Millisecond},
		{Verb: "DEL", Outcome: "ok", Duration: 80 * time.Millisecond, Calls: calls(70 * time.Millisecond), Pod: on("density-1")},
		{Verb: "CHECK", Outcome: "ok", Duration: 40 * time.Millisecond, Calls: calls(35 * time.Millisecond), Pod: on("density-2")},
		// not counted: failed, another Deployment's pod, no pod, not ADD or DEL
		{Verb: "ADD", Outcome: "rolled back", Duration: time.Second, Pod: on("density-3")},
		{Verb: "ADD", Outcome: "ok", Duration: time.Second, Pod: on("web-1")},
		{Verb: "ADD", Outcome: "ok", Duration: time.Second},
		{Verb: "RECLAIM", Outcome: "ok", Duration: time.Second, Pod: on("density-4")},
	}
	d := JournalDists(ops, "density-")
	assert.Equal(t, map[string]Dist{
		CatenaAdd.ID:        {samples: []time.Duration{100 * time.Millisecond, 50 * time.Millisecond}},
		catenaAddOwn.ID:     {samples: []time.Duration{10 * time.Millisecond, 5 * time.Millisecond}},
		CatenaDel.ID:        {samples: []time.Duration{80 * time.Millisecond}},
		catenaDelOwn.ID:     {samples: []time.Duration{10 * time.Millisecond}},
		CatenaCheck.ID:      {samples: []time.Duration{40 * time.Millisecond}},
		catenaAddLock.ID:    {samples: []time.Duration{0, 0}},
		catenaAddWrites.ID:  {samples: []time.Duration{4 * time.Millisecond, 2 * time.Millisecond}},
		catenaAddStartup.ID: {samples: []time.Duration{20 * time.Millisecond}},
		catenaAddCPU.ID:     {samples: []time.Duration{6 * time.Millisecond}},
		catenaAddDelay.ID:   {samples: []time.Duration{30 * time.Millisecond}},
	}, d)
	assert.Zero(t, JournalDists(nil, "density-")[CatenaAdd.ID].Count(), "the primary's rounds: no journal")
	assert.Equal(t, "ADD=5 DEL=1 CHECK=1 RECLAIM=1", Verbs(ops))
	assert.Empty(t, Verbs(nil))
}

const kubeletBefore = `# TYPE kubelet_pod_start_sli_duration_seconds histogram
kubelet_pod_start_sli_duration_seconds_bucket{le="0.5"} 1
kubelet_pod_start_sli_duration_seconds_bucket{le="1"} 2
kubelet_pod_start_sli_duration_seconds_bucket{le="+Inf"} 2
kubelet_pod_start_sli_duration_seconds_sum 1.2
kubelet_pod_start_sli_duration_seconds_count 2
`

const kubeletAfter = `# TYPE kubelet_pod_start_sli_duration_seconds histogram
kubelet_pod_start_sli_duration_seconds_bucket{le="0.5"} 1
kubelet_pod_start_sli_duration_seconds_bucket{le="1"} 4
kubelet_pod_start_sli_duration_seconds_bucket{le="+Inf"} 5
kubelet_pod_start_sli_duration_seconds_sum 6
kubelet_pod_start_sli_duration_seconds_count 5
`

func TestScrapesHistDists(t *testing.T) {
	s := Scrapes{
		KubeletBefore: families(t, kubeletBefore), KubeletAfter: families(t, kubeletAfter),
		ContainerdBefore: families(t, cniScrape([3]int{0, 0, 0}, [3]int{0, 0, 0})),
		ContainerdAfter:  families(t, cniScrape([3]int{1, 3, 3}, [3]int{2, 3, 4})),
	}
	d, err := s.HistDists()
	require.NoError(t, err)
	assert.Equal(t, 3, d[KubeletStartSLI.ID].Count(), "3 pods started in the round")
	assert.Equal(t, 3, d[CNISetup.ID].Count())
	assert.Equal(t, 4, d[CNITeardown.ID].Count())
	p50, ok := d[KubeletStartSLI.ID].Quantile(0.5)
	require.True(t, ok)
	assert.Equal(t, 875*time.Millisecond, p50, "rank 1.5 of 3: 0.75 of the way through the 2 in (0.5, 1]")

	// a CRI-O node's round: kubelet's histogram only
	only, err := Scrapes{KubeletBefore: s.KubeletBefore, KubeletAfter: s.KubeletAfter}.HistDists()
	require.NoError(t, err)
	assert.Equal(t, []string{KubeletStartSLI.ID}, slices.Collect(maps.Keys(only)))
	runtime, err := Scrapes{ContainerdBefore: s.ContainerdBefore, ContainerdAfter: s.ContainerdAfter}.HistDists()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{CNISetup.ID, CNITeardown.ID}, slices.Collect(maps.Keys(runtime)))

	s.KubeletAfter = families(t, "")
	_, err = s.HistDists()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubelet pod start SLI")
}
