package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// samplesMS makes samples of wall w[i] ms and CPU c[i] ms.
func samplesMS(w, c []int) []sample {
	out := make([]sample, len(w))
	for i := range w {
		out[i] = sample{wall: time.Duration(w[i]) * time.Millisecond, cpu: time.Duration(c[i]) * time.Millisecond}
	}
	return out
}

// burstMS is one burst of calls of wall w[i] ms and CPU c[i] ms.
func burstMS(wall, busy int, w, c []int) burst {
	s := samplesMS(w, c)
	return burst{wall: time.Duration(wall) * time.Millisecond, busy: time.Duration(busy) * time.Millisecond, each: wallsOf(s), cpu: cpusOf(s)}
}

// sampleCheck is a phase (g) where catena's CHECK costs ownWall and ownCPU
// ms more than plain's, and a DEL with no record costs 4 ms of wall and 3
// of CPU, sequentially and per call in the bursts.
func sampleCheck(ownWall, ownCPU int) *checkResult {
	plus := func(v []int, d int) []int {
		out := make([]int, len(v))
		for i := range v {
			out[i] = v[i] + d
		}
		return out
	}
	addW, addC := []int{50, 52, 54, 90}, []int{40, 41, 42, 60}
	chkW, chkC := []int{30, 31, 32, 45}, []int{20, 21, 22, 30}
	return &checkResult{
		add: map[string][]sample{"catena": samplesMS(plus(addW, 5), plus(addC, 5)), "plain": samplesMS(addW, addC)},
		check: map[string][]sample{
			"catena": samplesMS(plus(chkW, ownWall), plus(chkC, ownCPU)),
			"plain":  samplesMS(chkW, chkC),
		},
		delNoRecord: samplesMS([]int{4, 4, 4, 9}, []int{3, 3, 3, 5}),
		burstAdd: map[string][]burst{
			"catena": {burstMS(300, 600, []int{250, 260}, []int{60, 62})},
			"plain":  {burstMS(280, 550, []int{240, 250}, []int{55, 56})},
		},
		burstCheck: map[string][]burst{
			"catena": {burstMS(150+5*ownWall, 300, plus([]int{120, 130}, ownWall), plus([]int{30, 31}, ownCPU))},
			"plain":  {burstMS(150, 290, []int{120, 130}, []int{30, 31})},
		},
		burstDelNoRecord: []burst{burstMS(20, 30, []int{10, 12}, []int{3, 3})},
		conc:             2,
		loadBefore:       "1.00 1.00 1.00",
		loadAfter:        "1.50 1.10 1.00",
	}
}

func TestCheckOwn(t *testing.T) {
	tests := []struct {
		name            string
		ownWall, ownCPU int
		wantSeq         checkOwn
		wantBurst       checkOwn
		wantMet         bool
	}{
		{name: "cheaper than a DEL with no record", ownWall: 2, ownCPU: 1, wantMet: true,
			wantSeq:   checkOwn{ownWall: 2 * time.Millisecond, ownCPU: time.Millisecond, nrWall: 4 * time.Millisecond, nrCPU: 3 * time.Millisecond},
			wantBurst: checkOwn{ownWall: 10 * time.Millisecond, ownCPU: time.Millisecond, nrWall: 20 * time.Millisecond, nrCPU: 3 * time.Millisecond}},
		{name: "CPU over it", ownWall: 2, ownCPU: 4,
			wantSeq:   checkOwn{ownWall: 2 * time.Millisecond, ownCPU: 4 * time.Millisecond, nrWall: 4 * time.Millisecond, nrCPU: 3 * time.Millisecond},
			wantBurst: checkOwn{ownWall: 10 * time.Millisecond, ownCPU: 4 * time.Millisecond, nrWall: 20 * time.Millisecond, nrCPU: 3 * time.Millisecond}},
		{name: "wall over it", ownWall: 5, ownCPU: 1,
			wantSeq:   checkOwn{ownWall: 5 * time.Millisecond, ownCPU: time.Millisecond, nrWall: 4 * time.Millisecond, nrCPU: 3 * time.Millisecond},
			wantBurst: checkOwn{ownWall: 25 * time.Millisecond, ownCPU: time.Millisecond, nrWall: 20 * time.Millisecond, nrCPU: 3 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := sampleCheck(tc.ownWall, tc.ownCPU)
			own, nr, seq := c.seqOwn()
			assert.Equal(t, tc.wantSeq, seq)
			assert.Equal(t, 4, own.n)
			assert.Equal(t, 9*time.Millisecond, nr.wallP99, "p99 of 4 samples is the largest")
			assert.Equal(t, tc.wantMet, seq.met())
			burst := c.burstOwn()
			assert.Equal(t, tc.wantBurst, burst)
			assert.Equal(t, tc.wantMet, burst.met())
		})
	}
}

func TestReportCheck(t *testing.T) {
	tests := []struct {
		name            string
		ownWall, ownCPU int
		wantMet         bool
		want            []string
	}{
		{name: "met", ownWall: 2, ownCPU: 1, wantMet: true, want: []string{
			"catena  DEL, no record", "CHECK's own",
			// CHECK p50: 33.5 ms against 31.5
			"CHECK wall p50 1.063",
			"wall 2.0ms <= 4.0ms, CPU 1.0ms <= 3.0ms: met",
			"CHECK's own: burst wall 10.0ms (the catena CHECK burst less the plain one of the same round), CPU/call 1.0ms",
			"a burst of DELs with no record: wall 20.0ms, CPU/call 3.0ms",
			"load average 1.00 1.00 1.00 -> 1.50 1.10 1.00",
		}},
		{name: "not met", ownWall: 2, ownCPU: 4, want: []string{"CPU 4.0ms <= 3.0ms: NOT met"}},
		{name: "wall not met", ownWall: 5, ownCPU: 1, want: []string{"wall 5.0ms <= 4.0ms, CPU 1.0ms <= 3.0ms: NOT met"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			met, err := (&results{check: sampleCheck(tc.ownWall, tc.ownCPU)}).report(&out, 2)
			require.NoError(t, err)
			assert.Equal(t, tc.wantMet, met)
			for _, w := range tc.want {
				assert.Contains(t, out.String(), w)
			}
		})
	}
}

func TestChained(t *testing.T) {
	add := []burst{burstMS(300, 600, []int{250, 260}, []int{60, 62}), burstMS(310, 610, []int{1, 2}, []int{3, 4})}
	check := []burst{burstMS(150, 290, []int{120, 130}, []int{30, 31})}
	got := chained(add, check)
	require.Len(t, got, 1, "only the rounds both have")
	assert.Equal(t, burstMS(450, 890, []int{370, 390}, []int{90, 93}), got[0])
}

func TestCheckOrder(t *testing.T) {
	b := &bench{catena: &variant{name: "catena"}, plain: &variant{name: "plain"}}
	names := func(vs []*variant) []string {
		var out []string
		for _, v := range vs {
			if v == nil {
				out = append(out, "no record")
			} else {
				out = append(out, v.name)
			}
		}
		return out
	}
	assert.Equal(t, []string{"no record", "catena", "plain"}, names(b.checkOrder(0)))
	assert.Equal(t, []string{"plain", "catena", "no record"}, names(b.checkOrder(1)))
}

func TestPluginStdin(t *testing.T) {
	v := &variant{name: "catena", wrapped: true, network: "net-a", bridge: "br0", subnet: "10.251.1.0/24", dir: "/tmp/x", cache: "/tmp/x/cache"}
	data, err := pluginStdin(renderConflist(v), 18181)
	require.NoError(t, err)
	var got struct {
		CNIVersion    string            `json:"cniVersion"`
		Name          string            `json:"name"`
		Type          string            `json:"type"`
		CacheDir      string            `json:"cacheDir"`
		Delegates     []json.RawMessage `json:"delegates"`
		RuntimeConfig struct {
			PortMappings []struct {
				HostPort, ContainerPort int
				Protocol                string
			} `json:"portMappings"`
		} `json:"runtimeConfig"`
	}
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, "1.1.0", got.CNIVersion)
	assert.Equal(t, "net-a", got.Name)
	assert.Equal(t, "catena", got.Type)
	assert.Equal(t, "/tmp/x/cache", got.CacheDir)
	assert.Len(t, got.Delegates, 3)
	require.Len(t, got.RuntimeConfig.PortMappings, 1)
	assert.Equal(t, 18181, got.RuntimeConfig.PortMappings[0].HostPort)
	assert.Equal(t, 80, got.RuntimeConfig.PortMappings[0].ContainerPort)

	_, err = pluginStdin([]byte(`{"cniVersion":"1.1.0","name":"n","plugins":[]}`), 1)
	require.ErrorContains(t, err, "no plugins")
	_, err = pluginStdin([]byte(`{`), 1)
	require.ErrorContains(t, err, "parse conflist")
}
