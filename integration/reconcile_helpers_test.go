package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// reconcileFlags are run's reconciler flags against the node's containerd.
func (n *agentNode) reconcileFlags(interval, grace time.Duration, extra ...string) []string {
	return append([]string{"--runtime-endpoint", "unix://" + n.d.sock, "--reconcile-interval", interval.String(),
		"--grace", grace.String(), "--runtime-timeout", "5s"}, extra...)
}

// useChain makes the primary [plugins...] (failer available in the bin
// dir), starts `catena-agent run` with flags and waits until containerd
// loads the generated conflist.
func (n *agentNode) useChain(flags []string, plugins ...string) *agentProc {
	n.t.Helper()
	require.NoError(n.t, os.Symlink(filepath.Join(cniPath, "failer"), filepath.Join(n.binDir, "failer")))
	n.writePrimary(fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[%s]}`, n.v.cniVersion(), n.net, strings.Join(plugins, ",")))
	p := n.startRun(flags...)
	n.waitLoaded(true)
	return p
}

// scrape reads the agent's /metrics.
func (p *agentProc) scrape() map[string]*dto.MetricFamily {
	p.t.Helper()
	return scrapeMetrics(p.t, "http://"+p.addr+"/metrics")
}

// scrapeMetrics GETs a Prometheus text exposition and parses it with
// expfmt.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := tryScrape(url)
	require.NoError(t, err)
	return fams
}

// tryScrape is scrapeMetrics, its failure an error.
func tryScrape(url string) (map[string]*dto.MetricFamily, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// metric is the sum of name's samples whose labels include every
// "key=value" of labels (0 when there is none).
func (p *agentProc) metric(name string, labels ...string) float64 {
	p.t.Helper()
	return sampleSum(p.scrape(), name, labels...)
}

func sampleSum(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	fam, ok := fams[name]
	if !ok {
		return 0
	}
	sum := 0.0
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

// waitFor polls cond every 50ms until it holds or timeout passes, and
// returns how long that took; on timeout the test fails with cond's last
// explanation and the agent's log.
func (p *agentProc) waitFor(what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	p.t.Helper()
	start := time.Now()
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			p.t.Fatalf("not %s after %s: %s\n%s", what, timeout, why, p.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// opsOf are the operations of the given verbs in the node's journal.
func (n *agentNode) opsOf(verbs ...string) []events.Op {
	n.t.Helper()
	var out []events.Op
	for _, op := range catenaOps(n.t, n.w.cacheDir) {
		for _, v := range verbs {
			if op.Verb == v {
				out = append(out, op)
			}
		}
	}
	return out
}

// reclaimsCounted waits until p's passes have counted at least want
// reclaims, then returns the journal's RECLAIM operations. A reclaim
// removes the record before its operation's journal line is written, and
// the pass counts it after both: a test that saw the records go reads the
// journal through this.
func (n *agentNode) reclaimsCounted(p *agentProc, want int) []events.Op {
	n.t.Helper()
	p.waitFor("the reclaims counted", 10*time.Second, func() (bool, string) {
		return p.metric("catena_reconcile_reclaimed_total") >= float64(want), "not all counted yet"
	})
	return n.opsOf("RECLAIM")
}

// markPath is where the reconciler marks id's attachment.
func (n *agentNode) markPath(id string) string {
	return filepath.Join(n.w.cacheDir, "reconcile", n.net, id+":eth0.json")
}

// recordPath is id's record.
func (n *agentNode) recordPath(id string) string {
	return filepath.Join(n.w.cacheDir, "records", n.net, id+":eth0.json")
}

// requireTombstones: each of ids, torn down by the agent outside the
// runtime's DEL, left a tombstone saying by whom, so that a stale DEL of
// it invokes nothing.
func (n *agentNode) requireTombstones(by string, ids ...string) {
	n.t.Helper()
	for _, id := range ids {
		data, err := os.ReadFile(filepath.Join(n.w.cacheDir, "tombstones", n.net, id+":eth0.json"))
		require.NoError(n.t, err, "the tombstone of %s", id)
		var ts struct {
			By  string   `json:"by"`
			IPs []string `json:"ips"`
		}
		require.NoError(n.t, json.Unmarshal(data, &ts), "%s", data)
		assert.Equal(n.t, by, ts.By, "%s torn down by", id)
	}
}

// exists reports whether path exists, failing on any other error.
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return false
	}
	require.NoError(t, err)
	return true
}
