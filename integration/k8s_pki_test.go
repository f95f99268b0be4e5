package integration

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// k8sPKI is the cluster's private PKI, made at run time in dir: a CA, the
// API server's and kubelet's serving certificates, one client certificate
// per component,
// the service-account key pair, and a kubeconfig per client. Everything is
// ECDSA P-256: quick to make, and accepted everywhere (the service-account
// tokens are signed ES256).
type k8sPKI struct {
	t      *testing.T
	dir    string
	ca     *x509.Certificate
	caKey  crypto.Signer
	serial int64
}

// newK8sPKI makes the CA in dir.
func newK8sPKI(t *testing.T, dir string) *k8sPKI {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	key := newKey(t)
	p := &k8sPKI{t: t, dir: dir, caKey: key, serial: 1}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(p.serial),
		Subject:               pkix.Name{CommonName: "catena-it-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	p.ca, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	p.writePEM("ca.crt", "CERTIFICATE", der)
	p.writeKey("ca.key", key)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return key
}

// path is a file of the PKI.
func (p *k8sPKI) path(name string) string { return filepath.Join(p.dir, name) }

func (p *k8sPKI) writePEM(name, kind string, der []byte) {
	p.t.Helper()
	writeAtomic(p.t, p.path(name), pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}))
}

func (p *k8sPKI) writeKey(name string, key *ecdsa.PrivateKey) {
	p.t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(p.t, err)
	p.writePEM(name, "PRIVATE KEY", der)
}

// issue signs a certificate for subject (a server's when hosts or ips are
// given, a client's otherwise) and writes name.crt and name.key.
func (p *k8sPKI) issue(name string, subject pkix.Name, hosts []string, ips []net.IP) {
	p.t.Helper()
	key := newKey(p.t)
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     hosts,
		IPAddresses:  ips,
	}
	if len(hosts)+len(ips) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	require.NoError(p.t, err)
	p.writePEM(name+".crt", "CERTIFICATE", der)
	p.writeKey(name+".key", key)
}

// serviceAccountKey writes the key pair that signs (sa.key) and verifies
// (sa.pub) service-account tokens.
func (p *k8sPKI) serviceAccountKey() {
	p.t.Helper()
	key := newKey(p.t)
	p.writeKey("sa.key", key)
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	require.NoError(p.t, err)
	p.writePEM("sa.pub", "PUBLIC KEY", der)
}

// kubeconfig writes name.kubeconfig: the CA, the server, and the client
// certificate name.crt/name.key. JSON is valid kubeconfig YAML.
func (p *k8sPKI) kubeconfig(name, server string) string {
	p.t.Helper()
	cfg := map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"clusters": []any{map[string]any{"name": "it", "cluster": map[string]any{
			"server": server, "certificate-authority": p.path("ca.crt")}}},
		"users": []any{map[string]any{"name": name, "user": map[string]any{
			"client-certificate": p.path(name + ".crt"), "client-key": p.path(name + ".key")}}},
		"contexts":        []any{map[string]any{"name": "it", "context": map[string]any{"cluster": "it", "user": name}}},
		"current-context": "it",
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	require.NoError(p.t, err)
	path := p.path(name + ".kubeconfig")
	writeAtomic(p.t, path, raw)
	return path
}

// clusterPKI makes everything the cluster needs for node, with the API
// server at 127.0.0.1:port and advertised at advertise, and returns the
// kubeconfig of each client by name.
func clusterPKI(t *testing.T, dir, node string, port int, advertise net.IP) (*k8sPKI, map[string]string) {
	t.Helper()
	p := newK8sPKI(t, dir)
	p.issue("apiserver", pkix.Name{CommonName: "kube-apiserver"},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1), advertise})
	p.issue("apiserver-kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}, nil, nil)
	// kubelet's server listens on the node's address (k8sNode.ip)
	p.issue("kubelet-serving", pkix.Name{CommonName: node}, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), advertise})
	p.serviceAccountKey()
	server := "https://127.0.0.1:" + strconv.Itoa(port)
	clients := map[string]pkix.Name{
		"admin":                   {CommonName: "catena-it-admin", Organization: []string{"system:masters"}},
		"kube-controller-manager": {CommonName: "system:kube-controller-manager"},
		"kube-scheduler":          {CommonName: "system:kube-scheduler"},
		"kubelet":                 {CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
	}
	configs := map[string]string{}
	for name, subject := range clients {
		p.issue(name, subject, nil, nil)
		configs[name] = p.kubeconfig(name, server)
	}
	return p, configs
}

// nodeKubeconfig issues the kubelet client certificate of another node
// (CN system:node:<node>, O system:nodes: NodeRestriction lets a kubelet
// change its own Node only) and returns its kubeconfig.
func (cp *controlPlane) nodeKubeconfig(t *testing.T, node string) string {
	t.Helper()
	p := *cp.pki
	p.t = t
	name := "kubelet-" + node
	p.issue(name, pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, nil, nil)
	cp.pki.serial = p.serial
	return p.kubeconfig(name, cp.server())
}
