package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/leaks"
	"github.com/catena-cni/catena/node/nodeconf"
	"github.com/catena-cni/catena/node/reconcile"
)

// monitoringDir holds the alerting rules and their promtool tests.
const monitoringDir = "../../deploy/monitoring"

// ruleFile is the part of a Prometheus rules file the tests read.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

var catenaSeries = regexp.MustCompile(`\bcatena_[a-z_]+`)

// exportedNames are the metric families the agent's registry exports once
// every kind of observation has been made.
func exportedNames(t *testing.T) []string {
	m := New()
	NewJournalTail(t.TempDir(), m)
	m.ObserveOp(events.Op{Verb: "ADD", Outcome: "ok", Attachment: "podnet/c0ffee/eth0", Duration: time.Millisecond, LockWait: time.Millisecond,
		Writes: time.Millisecond, WriteCount: 2, Calls: []events.OpCall{{Type: "bridge", Verb: "ADD", Duration: time.Millisecond}}})
	m.ObservePass(&reconcile.Report{Start: time.Now(), Reclaimed: 1, Kept: 1, RuntimeError: "x", Retried: 1, RetryFailed: 1,
		Abandoned: 1, Held: 1, OldestHeld: time.Second,
		Counts: []reconcile.RecordCount{{Network: "podnet", Phase: string(cache.PhaseComplete), Count: 1}}})
	m.ObserveAdoption(1, 1, 1)
	m.ConflistWritten()
	m.ConflistTaken(nodeconf.TakenByCilium)
	m.ConflistBackoff(time.Second)
	require.NoError(t, m.ReadinessGauge(func() error { return nil }))
	require.NoError(t, m.WritableGauges(t.TempDir()))
	leakScan(t, m.Registry)
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	return names
}

// TestAlertRulesUseExportedSeries: every catena_* series an alert reads is
// one the agent exports, and every alert has its summary, description
// and runbook.
func TestAlertRulesUseExportedSeries(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "catena-rules.yaml"))
	require.NoError(t, err)
	var rf ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &rf))
	names := exportedNames(t)
	alerts := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts++
			for _, a := range []string{"summary", "description", "runbook"} {
				assert.NotEmpty(t, r.Annotations[a], "alert %s: annotation %s", r.Alert, a)
			}
			for _, s := range catenaSeries.FindAllString(r.Expr, -1) {
				assert.True(t, slices.Contains(names, trimSuffixes(s)), "alert %s reads %s, which the agent does not export", r.Alert, s)
			}
		}
	}
	assert.GreaterOrEqual(t, alerts, 8)
}

// dashPanel is the part of a Grafana panel the tests read; a row holds
// its panels in Panels only while it is collapsed.
type dashPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos *struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Panels  []dashPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// TestDashboardUsesExportedSeries: the Grafana dashboard is JSON whose
// every panel has a unique id, a title and a place in the grid, and reads
// series the agent exports; a row (type row) queries nothing, and a
// collapsed row's panels are checked as the others.
func TestDashboardUsesExportedSeries(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "catena-dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		UID    string      `json:"uid"`
		Panels []dashPanel `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	assert.Equal(t, "catena", dash.UID)
	names := exportedNames(t)
	ids := map[int]string{}
	graphs := 0
	var check func(p dashPanel, inRow bool)
	check = func(p dashPanel, inRow bool) {
		require.NotEmpty(t, p.Title, "panel %d", p.ID)
		require.NotNil(t, p.GridPos, "panel %q", p.Title)
		assert.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q fits the grid's 24 columns", p.Title)
		if other, dup := ids[p.ID]; dup {
			assert.Failf(t, "duplicate panel id", "%q and %q are both %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			assert.False(t, inRow, "row %q inside a row", p.Title)
			assert.Empty(t, p.Targets, "row %q queries nothing", p.Title)
			for _, c := range p.Panels {
				check(c, true)
			}
			return
		}
		graphs++
		assert.Empty(t, p.Panels, "panel %q", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q", p.Title)
		for _, tg := range p.Targets {
			series := catenaSeries.FindAllString(tg.Expr, -1)
			assert.NotEmpty(t, series, "panel %q reads Catena's series", p.Title)
			for _, s := range series {
				assert.True(t, slices.Contains(names, trimSuffixes(s)), "panel %q reads %s, which the agent does not export", p.Title, s)
			}
		}
	}
	for _, p := range dash.Panels {
		check(p, false)
	}
	assert.GreaterOrEqual(t, graphs, 6)
	for i, a := range dash.Panels {
		for _, b := range dash.Panels[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			overlap := ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H
			assert.False(t, overlap, "panels %q and %q overlap", a.Title, b.Title)
		}
	}
}

// trimSuffixes is a histogram's series name as its family's.
func trimSuffixes(s string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		s = strings.TrimSuffix(s, suffix)
	}
	return s
}

// TestAlertRulesPromtool checks the rules with promtool and runs their unit
// tests (each alert fires on synthetic series and stays quiet on healthy
// ones). promtool is bin/tools/promtool (scripts/install-promtool.sh, run
// by make plugins) or $PROMTOOL.
func TestAlertRulesPromtool(t *testing.T) {
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		promtool = filepath.Join("..", "..", "bin", "tools", "promtool")
	}
	if _, err := os.Stat(promtool); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool missing at %s (make plugins installs it; CI=true: the rules must be checked): %v", promtool, err)
		}
		t.Skipf("promtool missing at %s: run scripts/install-promtool.sh", promtool)
	}
	abs, err := filepath.Abs(promtool)
	require.NoError(t, err)
	for _, args := range [][]string{{"check", "rules", "catena-rules.yaml"}, {"test", "rules", "catena-rules.test.yaml"},
		{"check", "config", "--syntax-only", "scrape-config.yaml"}} {
		cmd := exec.Command(abs, args...)
		cmd.Dir = monitoringDir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

type oneSandbox struct{}

func (oneSandbox) SandboxIDs(context.Context) (map[string]struct{}, error) {
	return map[string]struct{}{"live": {}}, nil
}

// leakScan runs the agent's leak scan, registered on reg, over a node
// with one leaked host-local reservation.
func leakScan(t *testing.T, reg prometheus.Registerer) {
	t.Helper()
	d := t.TempDir()
	conf, ipam := filepath.Join(d, "conf"), filepath.Join(d, "ipam")
	require.NoError(t, os.MkdirAll(filepath.Join(ipam, "net"), 0o700))
	require.NoError(t, os.MkdirAll(conf, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(conf, "10-net.conflist"), fmt.Appendf(nil,
		`{"cniVersion":"1.1.0","name":"net","plugins":[{"type":"bridge","ipam":{"type":"host-local","dataDir":%q}}]}`, ipam), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ipam, "net", "10.0.0.5"), []byte("gone\r\neth0"), 0o600))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(ipam, "net", "10.0.0.5"), old, old))
	w := leaks.NewWatcher(reg, leaks.Watcher{Interval: time.Minute, Scanner: &leaks.Scanner{Fs: afero.NewOsFs(), ConfDir: conf,
		CacheDir: filepath.Join(d, "catena"), Sandboxes: oneSandbox{}, Live: func() (*leaks.Live, error) { return &leaks.Live{}, nil },
		MinAge: leaks.DefaultMinAge}})
	w.Pass(context.Background())
}
