package integration

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// prometheusCRDs are the Prometheus Operator's CRDs of the chart's
// monitoring objects, as scripts/install-prometheus-crds.sh fetches them
// (PROMETHEUS_OPERATOR_VERSION), and the names they define.
var prometheusCRDs = map[string]string{
	"monitoring.coreos.com_servicemonitors.yaml": "servicemonitors.monitoring.coreos.com",
	"monitoring.coreos.com_prometheusrules.yaml": "prometheusrules.monitoring.coreos.com",
}

// monitoringObjects has the API server check the chart's ServiceMonitor
// and PrometheusRule (monitoring.serviceMonitor.enabled,
// monitoring.prometheusRule.enabled) against the Prometheus Operator's own
// CRDs: the CRDs applied until Established, the chart rendered with the
// install's values and both options, and its monitoring objects applied as
// a server-side dry run with strict field validation, accepted; the
// ServiceMonitor with a field its CRD does not have is refused (the check
// can fail). The CRDs are deleted after.
func (r *k8sRun) monitoringObjects(t *testing.T) {
	dir := filepath.Join(binDirOf(t), "tools", "prometheus-operator-crds")
	var files, names []string
	for f, name := range prometheusCRDs {
		require.FileExists(t, filepath.Join(dir, f), "bash scripts/install-prometheus-crds.sh (make plugins does)")
		files = append(files, "-f", filepath.Join(dir, f))
		names = append(names, "crd/"+name)
	}
	t.Cleanup(func() {
		if out, err := r.c.kubectlErr(nil, append([]string{"delete", "--ignore-not-found", "--wait"}, names...)...); err != nil {
			t.Errorf("cleanup: deleting the Prometheus Operator's CRDs: %v: %s", err, out)
		}
	})
	r.c.kubectl(t, nil, append([]string{"apply", "--server-side"}, files...)...)
	r.c.kubectl(t, nil, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, names...)...)

	rendered := r.c.helm(t, "template", helmRelease, chartDir(), "--namespace", "catena-system", "-f", r.c.valuesFile(t, r.n, r.tag),
		"--set", "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true", "--show-only", "templates/monitoring.yaml")
	docs := map[string]map[string]any{}
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if kind, _ := obj["kind"].(string); kind != "" {
			docs[kind] = obj
		}
	}
	require.Contains(t, docs, "ServiceMonitor")
	require.Contains(t, docs, "PrometheusRule")
	dryRun := func(objs ...map[string]any) (string, error) {
		var b bytes.Buffer
		for _, o := range objs {
			raw, err := yaml.Marshal(o)
			require.NoError(t, err)
			b.WriteString("---\n")
			b.Write(raw)
		}
		return r.c.kubectlErr(b.Bytes(), "apply", "--dry-run=server", "--validate=strict", "-f", "-")
	}
	out, err := dryRun(docs["ServiceMonitor"], docs["PrometheusRule"])
	require.NoError(t, err, out)
	assert.Contains(t, out, "servicemonitor.monitoring.coreos.com/catena-agent created (server dry run)")
	assert.Contains(t, out, "prometheusrule.monitoring.coreos.com/")

	bad := docs["ServiceMonitor"]
	endpoints := bad["spec"].(map[string]any)["endpoints"].([]any)
	endpoints[0].(map[string]any)["scrapeEvery"] = "30s"
	out, err = dryRun(bad)
	require.Error(t, err, "a ServiceMonitor field its CRD does not have is refused")
	assert.Contains(t, out, `unknown field "spec.endpoints[0].scrapeEvery"`)
	summary("monitoring objects", "the chart's ServiceMonitor and PrometheusRule accepted by the API server against the Prometheus Operator's CRDs (strict, server-side dry run); an unknown field refused")
}
