package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/internal/clitest"
)

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(?:,|\}))+)? (\S+)$`)
	metaLine   = regexp.MustCompile(`^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$`)
)

// parseExposition checks the Prometheus text format as node_exporter's
// textfile collector reads it (each family: HELP, then TYPE, then its
// samples; a family declared once; summary samples are name{quantile},
// name_sum, name_count) and returns every sample line keyed by its name and
// labels, with its value.
func parseExposition(t *testing.T, text string) map[string]float64 {
	t.Helper()
	require.True(t, strings.HasSuffix(text, "\n"), "ends with a newline")
	samples := map[string]float64{}
	declared := map[string]string{} // family -> type
	var family, typ string
	var sawHelp bool
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if m := metaLine.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "HELP":
				require.NotContains(t, declared, m[2], "line %d: family %s declared twice", i+1, m[2])
				family, typ, sawHelp = m[2], "", true
			case "TYPE":
				require.True(t, sawHelp && m[2] == family, "line %d: TYPE of %s must follow its HELP", i+1, m[2])
				require.Contains(t, []string{"gauge", "counter", "summary", "histogram", "untyped"}, m[3])
				typ, declared[family] = m[3], m[3]
			}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		require.NotNil(t, m, "line %d is not a sample: %q", i+1, line)
		require.NotEmpty(t, typ, "line %d: sample before its TYPE", i+1)
		name := m[1]
		switch {
		case name == family:
			if typ == "summary" {
				assert.Contains(t, m[2], `quantile="`, "line %d: a summary's plain samples are quantiles", i+1)
			}
		case typ == "summary" && (name == family+"_sum" || name == family+"_count"):
		default:
			t.Fatalf("line %d: sample %s outside its family %s", i+1, name, family)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err, "line %d", i+1)
		key := name + m[2]
		require.NotContains(t, samples, key, "line %d: duplicate sample", i+1)
		samples[key] = v
	}
	return samples
}

func TestMetrics(t *testing.T) {
	f := newFixture(t)
	writeEvents(t, f)
	f.save("c-live", "eth0", cache.PhaseComplete, time.Hour, []string{"okplug"}, cache.StepAdded)
	f.save("c-stuck", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"okplug"}, cache.StepDelFailed)
	f.save("c-stuck2", "eth0", cache.PhaseNeedsTeardown, time.Hour, []string{"okplug"}, cache.StepDelFailed)

	out, stderr, code := f.run("metrics")
	require.Equal(t, 0, code, stderr)
	s := parseExposition(t, out)
	for k, want := range map[string]float64{
		`catena_events_window_seconds`:                                                        3600,
		`catena_operations{outcome="ok",verb="ADD"}`:                                          3,
		`catena_operations{outcome="error",verb="ADD"}`:                                       1,
		`catena_operation_rollbacks{verb="ADD"}`:                                              1,
		`catena_operation_duration_seconds{verb="ADD",quantile="0.5"}`:                        0.025,
		`catena_operation_duration_seconds{verb="ADD",quantile="0.95"}`:                       0.045,
		`catena_operation_duration_seconds_sum{verb="ADD"}`:                                   0.12,
		`catena_operation_duration_seconds_count{verb="ADD"}`:                                 4,
		`catena_lock_wait_seconds{verb="DEL",quantile="0.95"}`:                                0.005,
		`catena_lock_wait_max_seconds{verb="DEL"}`:                                            0.005,
		`catena_delegate_calls{index="0",type="bridge",verb="ADD"}`:                           4,
		`catena_delegate_failures{index="1",type="portmap",verb="ADD"}`:                       1,
		`catena_delegate_duration_seconds{index="0",type="bridge",verb="ADD",quantile="0.5"}`: 0.02,
		`catena_delegate_duration_seconds_count{index="0",type="bridge",verb="DEL"}`:          2,
		`catena_records{network="podnet",phase="complete"}`:                                   1,
		`catena_records{network="podnet",phase="needs-teardown"}`:                             2,
	} {
		got, found := s[k]
		if assert.True(t, found, "sample %s in:\n%s", k, out) {
			assert.InDelta(t, want, got, 1e-12, k)
		}
	}
	assert.Contains(t, out, "# HELP catena_records Attachment records in the cache dir now, by network and phase")
	assert.Contains(t, out, "# TYPE catena_delegate_duration_seconds summary\n")
	assert.Contains(t, out, "# TYPE catena_delegate_calls gauge\n")

	t.Run("output file", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "catena.prom")
		require.NoError(t, os.WriteFile(p, []byte("stale\n"), 0o600))
		stdout, stderr, code := f.run("metrics", "--output", p)
		require.Equal(t, 0, code, stderr)
		assert.Empty(t, stdout)
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, out, string(data))
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "readable by node_exporter")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Len(t, entries, 1, "no temporary file left")
	})
	t.Run("json", func(t *testing.T) {
		stdout, _, code := f.run("metrics", "--json")
		require.Equal(t, 0, code)
		m := decodeJSON[map[string]any](t, stdout)
		assert.Len(t, m["operations"], 2)
		assert.Equal(t, []any{
			map[string]any{"network": testNet, "phase": "complete", "count": float64(1)},
			map[string]any{"network": testNet, "phase": "needs-teardown", "count": float64(2)},
		}, m["records"])
	})
}

func TestMetricsEmpty(t *testing.T) {
	f := newFixture(t)
	out, stderr, code := f.run("metrics")
	require.Equal(t, 0, code, stderr)
	s := parseExposition(t, out)
	assert.Equal(t, map[string]float64{"catena_events_window_seconds": 3600, "catena_events_unreadable_lines": 0}, s)
	assert.Equal(t, 2, strings.Count(out, "# TYPE "), "a family without samples is not written (client_golang's registry)")
}

// TestExpositionEscapesAndLints: label values a delegate controls are
// made printable and escaped by expfmt, and the exposition passes
// client_golang's linter.
func TestExpositionEscapesAndLints(t *testing.T) {
	var buf bytes.Buffer
	m := metricsData{stats: &stats{WindowSeconds: 60}, Records: []recordCount{{Network: "a\\b\"c\nd", Phase: "esc \x1b[2J bad \xff", Count: 2}}}
	require.NoError(t, writeExposition(&buf, m))
	out := buf.String()
	assert.Contains(t, out, `catena_records{network="a\\b\"c\nd",phase="esc \\x1b[2J bad \\xff"} 2`)
	clitest.AssertTerminalSafe(t, out, "exposition")
	parseExposition(t, out)
	problems, err := testutil.GatherAndLint(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(out))
		var list []*dto.MetricFamily
		for _, f := range fams {
			list = append(list, f)
		}
		return list, err
	}))
	require.NoError(t, err)
	assert.Empty(t, problems)
}
