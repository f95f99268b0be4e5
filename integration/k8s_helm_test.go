package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// helmRelease is the release the scenarios install the chart as.
const helmRelease = "catena"

// helmErr runs the pinned helm (bin/tools/helm, scripts/install-helm.sh)
// as admin, its config, cache and data under the cluster's HOME, and
// returns its combined output.
func (c *k8sCluster) helmErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(binDirOf(t), "tools", "helm")
	require.FileExists(t, bin, "bash scripts/install-helm.sh (make plugins does)")
	cmd := exec.Command(bin, append([]string{"--kubeconfig=" + c.kubeconfigs["admin"]}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+c.home,
		"HELM_CONFIG_HOME="+filepath.Join(c.home, "helm", "config"),
		"HELM_CACHE_HOME="+filepath.Join(c.home, "helm", "cache"),
		"HELM_DATA_HOME="+filepath.Join(c.home, "helm", "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %v: %w: %s", args, err, out.String())
	}
	return out.String(), nil
}

// helm is helmErr that requires success.
func (c *k8sCluster) helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.helmErr(t, args...)
	require.NoError(t, err)
	return out
}

// chartDir is the chart in the repository.
func chartDir() string { return filepath.Join(repoRoot(), "deploy", "chart", "catena") }

// helmValues are the chart's values for node n: its private dirs as the
// node's paths (each mounted at the same path), its runtime's socket, the
// pods pinned to it (one agent per host while two nodes run), the image
// tag, and the API server's own address (no kube-proxy here: the agent
// reaches the API server as on a node without it). Nothing else is set.
func (c *k8sCluster) helmValues(t *testing.T, n *k8sNode, tag string) map[string]any {
	t.Helper()
	m := n.hostPathMap(t)
	var endpoint string
	if n.crio != nil {
		endpoint = "unix://" + n.crio.sock
	} else {
		endpoint = "unix://" + n.ctd.sock
		require.Equal(t, m["/run/containerd"], filepath.Dir(n.ctd.sock), "containerd's socket is in the mounted dir")
	}
	return map[string]any{
		"image": map[string]any{"tag": tag},
		"paths": map[string]any{
			"confDir":    m["/etc/cni/net.d"],
			"binDir":     m["/opt/cni/bin"],
			"stateDir":   m["/var/lib/cni"],
			"cacheDir":   remap(m, "/var/lib/cni/catena"),
			"resultsDir": remap(m, "/var/lib/cni/results"),
			"netnsDir":   m["/var/run/netns"],
		},
		"runtime": map[string]any{
			"endpoint":            endpoint,
			"containerdSocketDir": m["/run/containerd"],
			"crioSocketDir":       m["/var/run/crio"],
		},
		"nodeSelector": map[string]any{"kubernetes.io/hostname": n.name},
		"apiServer":    map[string]any{"host": "127.0.0.1", "port": strconv.Itoa(c.apiPort)},
	}
}

// helmInstall installs the chart on node n with helmValues and the extra
// --set values, creating the namespace.
func (c *k8sCluster) helmInstall(t *testing.T, n *k8sNode, tag string, set ...string) string {
	t.Helper()
	return c.helm(t, append([]string{"install", helmRelease, chartDir(), "--namespace", "catena-system", "--create-namespace",
		"-f", c.valuesFile(t, n, tag)}, setArgs(set)...)...)
}

// helmUpgrade upgrades the release, keeping its values, with set.
func (c *k8sCluster) helmUpgrade(t *testing.T, set ...string) string {
	t.Helper()
	return c.helm(t, append([]string{"upgrade", helmRelease, chartDir(), "--namespace", "catena-system", "--reuse-values"}, setArgs(set)...)...)
}

// helmUninstall uninstalls the release, waiting for its objects to go.
func (c *k8sCluster) helmUninstall(t *testing.T) string {
	t.Helper()
	return c.helm(t, "uninstall", helmRelease, "--namespace", "catena-system", "--wait", "--timeout=2m")
}

func setArgs(set []string) []string {
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// valuesFile writes helmValues to a file of n's dir.
func (c *k8sCluster) valuesFile(t *testing.T, n *k8sNode, tag string) string {
	t.Helper()
	raw, err := yaml.Marshal(c.helmValues(t, n, tag))
	require.NoError(t, err)
	path := filepath.Join(n.dir, "helm-values.yaml")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

// waitAgentGone waits until the node's agent pod is gone and, with
// conflistGone, the generated conflist too (an uninstall: the agent takes
// it as it exits).
func (r *k8sRun) waitAgentGone(t *testing.T, conflistGone bool) {
	t.Helper()
	what := "the agent's pod is gone"
	if conflistGone {
		what += " and took the generated conflist"
	}
	waitFor(t, what, 2*time.Minute, 250*time.Millisecond, func() error {
		if pods := r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent"); len(pods) > 0 {
			return fmt.Errorf("%d agent pods", len(pods))
		}
		if conflistGone && fileExists(filepath.Join(r.n.confDir(), generatedName)) {
			return fmt.Errorf("%s still there", generatedName)
		}
		return nil
	}, r.n.kubelet)
}
