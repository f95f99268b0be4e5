package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/catena-cni/catena/libchain/release"
)

const chartDir = "chart/catena"

// helmBin is the pinned helm scripts/install-helm.sh builds.
func helmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CATENA_BIN")
	if bin == "" {
		bin = "../bin"
	}
	path := filepath.Join(bin, "tools", "helm")
	require.FileExists(t, path, "build it first: bash scripts/install-helm.sh (make plugins does)")
	return path
}

// helm runs the pinned helm with args, returning its combined output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(helmBin(t), args...).CombinedOutput()
	return string(out), err
}

// render is helm template of the chart with args (--set ...).
func render(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := helm(t, append([]string{"template", "catena", chartDir, "--namespace", "catena-system"}, args...)...)
	require.NoError(t, err, out)
	return []byte(out)
}

// TestManifestsRendered: deploy/catena.yaml and deploy/uninstall.yaml are
// the chart's rendering (make manifests), byte for byte.
func TestManifestsRendered(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("bash", "../scripts/render-manifests.sh", dir)
	cmd.Env = append(os.Environ(), "HELM="+helmBin(t))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	for _, f := range []struct {
		name      string
		committed []byte
	}{{"catena.yaml", CatenaYAML}, {"uninstall.yaml", UninstallYAML}} {
		rendered, err := os.ReadFile(filepath.Join(dir, f.name))
		require.NoError(t, err)
		assert.Equal(t, string(rendered), string(f.committed), "deploy/%s differs from the chart's rendering: run make manifests", f.name)
	}
}

// TestChartVersion: the chart is Catena's release, and so is the image
// it runs by default.
func TestChartVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var chart struct {
		APIVersion string `json:"apiVersion"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	assert.Equal(t, "v2", chart.APIVersion, "Helm 3 and 4")
	assert.Equal(t, release.Version, chart.AppVersion)
	assert.Equal(t, strings.TrimPrefix(release.Version, "v"), chart.Version)
}

// TestChartSchemaRefuses: a wrong value fails at render time, naming it.
func TestChartSchemaRefuses(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"reconcile.interval=soon", "/reconcile/interval"},
		{"reconcil.interval=30s", "additional properties 'reconcil' not allowed"},
		{"paths.confDir=etc/cni", "/paths/confDir"},
		{"primary.networkDirPlugins=maybe", "/primary/networkDirPlugins"},
		{"metrics.securePort=70000", "/metrics/securePort"},
		{"runtime.endpoint=/run/containerd/containerd.sock", "/runtime/endpoint"},
		{"image.pullPolicy=Sometimes", "/image/pullPolicy"},
		{"terminationGracePeriodSeconds=1", "/terminationGracePeriodSeconds"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := helm(t, "template", "catena", chartDir, "--set", tc.set)
			require.Error(t, err, out)
			assert.Contains(t, out, "values don't meet the specifications of the schema")
			assert.Contains(t, out, tc.want)
		})
	}
}

// TestChartValues: the values an operator changes reach the objects.
func TestChartValues(t *testing.T) {
	byKind, ds := decodeAll(t, render(t,
		"--set", "image.repository=registry.example/catena,image.tag=v9,image.pullPolicy=Always",
		"--set", "paths.cacheDir=/var/lib/catena,paths.confDir=/etc/cni/custom.d",
		"--set", "reconcile.interval=45s,agent.uninstallOnDelete=false",
		"--set", "metrics.secureCertSecret=catena-tls,metrics.port=9700",
		"--set", "nodeSelector.role=cni,priorityClassName=",
		"--set", "resources.limits.memory=256Mi",
		"--set", "apiServer.host=10.0.0.1,apiServer.port=6443"))
	assert.NotContains(t, byKind, "Namespace", "helm install --create-namespace makes it")
	assert.NotContains(t, byKind, "Role", "no DaemonSet watch without uninstallOnDelete")
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	assert.Equal(t, "registry.example/catena:v9", c.Image)
	assert.Equal(t, corev1.PullAlways, c.ImagePullPolicy)
	assert.Equal(t, map[string]string{"role": "cni"}, spec.NodeSelector)
	assert.Empty(t, spec.PriorityClassName)
	assert.Equal(t, "256Mi", c.Resources.Limits.Memory().String())
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "10.0.0.1", env["KUBERNETES_SERVICE_HOST"])
	assert.Equal(t, "6443", env["KUBERNETES_SERVICE_PORT"])
	flags := argFlags(t, c.Args)
	assert.Equal(t, "/var/lib/catena", flags["cache-dir"])
	assert.Equal(t, "/etc/cni/custom.d", flags["cni-conf-dir"])
	assert.Equal(t, "127.0.0.1:9700", flags["listen-addr"])
	assert.Equal(t, 9700, c.ReadinessProbe.HTTPGet.Port.IntValue())
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for _, p := range []string{"/var/lib/catena", "/etc/cni/custom.d", "/etc/catena/metrics-tls"} {
		assert.Contains(t, mounts, p)
	}
	cm := byKind["ConfigMap"].(*corev1.ConfigMap)
	assert.Equal(t, "45s", cm.Data["CATENA_AGENT_RECONCILE_INTERVAL"])
	assert.Empty(t, cm.Data["CATENA_AGENT_UNINSTALL_ON_DELETE"])
	assert.Equal(t, "/etc/catena/metrics-tls", cm.Data["CATENA_AGENT_SECURE_METRICS_CERT_DIR"])

	// A changed option changes the pod template: helm upgrade rolls it.
	checksum := func(args ...string) string {
		_, ds := decodeAll(t, render(t, args...))
		return ds.Spec.Template.Annotations["catena.dev/options-checksum"]
	}
	defaults := checksum()
	assert.NotEqual(t, defaults, checksum("--set", "reconcile.interval=46s"))
	assert.Equal(t, defaults, checksum(), "the checksum is stable")
}

// TestChartMonitoring: the ServiceMonitor, its Service and the
// PrometheusRule, when enabled, with the rules of deploy/monitoring.
func TestChartMonitoring(t *testing.T) {
	out := string(render(t, "--set", "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true"))
	docs := map[string]map[string]any{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if obj != nil {
			docs[obj["kind"].(string)] = obj
		}
	}
	for _, k := range []string{"Service", "ServiceMonitor", "PrometheusRule"} {
		require.Contains(t, docs, k)
	}
	svc := docs["Service"]["spec"].(map[string]any)
	assert.Equal(t, "None", svc["clusterIP"])
	ep := docs["ServiceMonitor"]["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
	assert.Equal(t, "https", ep["scheme"])
	assert.Equal(t, svc["ports"].([]any)[0].(map[string]any)["name"], ep["port"])

	rules, err := os.ReadFile("monitoring/catena-rules.yaml")
	require.NoError(t, err)
	var want map[string]any
	require.NoError(t, yaml.Unmarshal(rules, &want))
	assert.Equal(t, want["groups"], docs["PrometheusRule"]["spec"].(map[string]any)["groups"], "the rules of deploy/monitoring/catena-rules.yaml")

	defaults := string(render(t))
	for _, k := range []string{"ServiceMonitor", "PrometheusRule"} {
		assert.NotContains(t, defaults, "kind: "+k, "off by default")
	}
}

// TestChartLint: helm lint, strict, with the defaults and with every
// option on.
func TestChartLint(t *testing.T) {
	for _, set := range []string{"", "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,metrics.secureCertSecret=x", "uninstall.manifest=true,uninstall.removeBinaries=true"} {
		args := []string{"lint", "--strict", chartDir}
		if set != "" {
			args = append(args, "--set", set)
		}
		out, err := helm(t, args...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "0 chart(s) failed")
	}
}
