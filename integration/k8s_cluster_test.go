package integration

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// k8sBinDir is where scripts/install-k8s.sh puts the pinned etcd and
// Kubernetes binaries: bin/k8s/<K8S_VERSION>/, the version read from
// scripts/versions.env. Missing binaries fail the test (never a skip).
func k8sBinDir(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(), "scripts", "versions.env"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	version := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "K8S_VERSION="); ok {
			version = v
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, version, "K8S_VERSION in scripts/versions.env")
	dir := filepath.Join(repoRoot(), "bin", "k8s", version)
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet"} {
		_, err := os.Stat(filepath.Join(dir, b))
		require.NoError(t, err, "%s missing in %s (run `make plugins`, which runs scripts/install-k8s.sh)", b, dir)
	}
	return dir
}

// controlPlane is etcd, the API server, the controller-manager and the
// scheduler, all on 127.0.0.1, with private dirs under dir.
type controlPlane struct {
	dir         string
	bins        string
	pki         *k8sPKI
	kubeconfigs map[string]string
	apiPort     int
	etcd        *daemon
	apiserver   *daemon
	cm          *daemon
	scheduler   *daemon
}

// startStore starts etcd and the API server and waits until the API server
// is ready. The cleanup it registers stops etcd, then the API server last.
func startStore(t *testing.T, dir, node string) *controlPlane {
	t.Helper()
	cp := &controlPlane{dir: dir, bins: k8sBinDir(t), apiPort: freePort(t)}
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o700))
	cp.pki, cp.kubeconfigs = clusterPKI(t, filepath.Join(dir, "pki"), node, cp.apiPort, advertiseIP(t))

	client, peer := freePort(t), freePort(t)
	clientURL, peerURL := fmt.Sprintf("http://127.0.0.1:%d", client), fmt.Sprintf("http://127.0.0.1:%d", peer)
	cp.etcd = startDaemon(t, logs, "etcd", filepath.Join(cp.bins, "etcd"),
		"--name=it", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=it="+peerURL, "--unsafe-no-fsync")
	t.Cleanup(func() {
		cp.etcd.stop(10 * time.Second)
		cp.apiserver.stop(30 * time.Second)
	})
	waitFor(t, "etcd is healthy", time.Minute, 100*time.Millisecond, func() error {
		return httpOK(http.DefaultClient, clientURL+"/health")
	}, cp.etcd)

	pki := cp.pki.path
	cp.apiserver = startDaemon(t, logs, "kube-apiserver", filepath.Join(cp.bins, "kube-apiserver"),
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(cp.apiPort), "--advertise-address="+advertiseIP(t).String(),
		"--cert-dir="+filepath.Join(dir, "apiserver"),
		"--tls-cert-file="+pki("apiserver.crt"), "--tls-private-key-file="+pki("apiserver.key"),
		"--client-ca-file="+pki("ca.crt"),
		"--kubelet-client-certificate="+pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+pki("apiserver-kubelet-client.key"),
		// kubelet serves on the node's address (kubectl exec, logs):
		// its name resolves nowhere here
		"--kubelet-preferred-address-types=InternalIP",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki("sa.pub"), "--service-account-signing-key-file="+pki("sa.key"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
		"--profiling=false")
	api := cp.httpClient(t)
	waitFor(t, "the API server is ready", 2*time.Minute, 200*time.Millisecond, func() error {
		return httpOK(api, cp.server()+"/readyz")
	}, cp.etcd, cp.apiserver)
	return cp
}

// startControllers starts the controller-manager and the scheduler. The
// cleanup it registers stops them.
func (cp *controlPlane) startControllers(t *testing.T) {
	t.Helper()
	logs := filepath.Join(cp.dir, "logs")
	pki := cp.pki.path
	kc := cp.kubeconfigs["kube-controller-manager"]
	cp.cm = startDaemon(t, logs, "kube-controller-manager", filepath.Join(cp.bins, "kube-controller-manager"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(freePort(t)), "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+pki("sa.key"), "--root-ca-file="+pki("ca.crt"),
		"--cluster-signing-cert-file="+pki("ca.crt"), "--cluster-signing-key-file="+pki("ca.key"),
		"--flex-volume-plugin-dir="+filepath.Join(cp.dir, "flex"),
		"--profiling=false")
	ks := cp.kubeconfigs["kube-scheduler"]
	cp.scheduler = startDaemon(t, logs, "kube-scheduler", filepath.Join(cp.bins, "kube-scheduler"),
		"--kubeconfig="+ks, "--authentication-kubeconfig="+ks, "--authorization-kubeconfig="+ks,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(freePort(t)), "--leader-elect=false",
		"--profiling=false")
	t.Cleanup(func() {
		cp.scheduler.stop(10 * time.Second)
		cp.cm.stop(10 * time.Second)
	})
}

// server is the API server's URL.
func (cp *controlPlane) server() string { return "https://127.0.0.1:" + strconv.Itoa(cp.apiPort) }

// httpClient talks to the API server as admin.
func (cp *controlPlane) httpClient(t *testing.T) *http.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(cp.pki.path("admin.crt"), cp.pki.path("admin.key"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cp.pki.ca)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
}

// httpOK GETs url and requires 200.
func httpOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
