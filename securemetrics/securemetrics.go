// Package securemetrics serves the agent's /metrics over HTTPS behind the
// API server's authentication and authorization, as kubelet does: a bearer
// token is checked with a TokenReview, then the user with a
// SubjectAccessReview of get on the non-resource URL /metrics. It uses
// controller-runtime's metrics filter (k8s.io/apiserver's delegating
// authenticator and authorizer, with their caches).
package securemetrics

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
)

// Handler serves next's GET /metrics to the clients that the API server
// at cfg authenticates (401 otherwise) and authorizes to get /metrics
// (403 otherwise); every other path is 404.
func Handler(cfg *rest.Config, metrics http.Handler, log *slog.Logger) (http.Handler, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("secure metrics: client of the API server: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("secure metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	h, err := filter(logr.FromSlogHandler(log.Handler()), mux)
	if err != nil {
		return nil, fmt.Errorf("secure metrics: %w", err)
	}
	return h, nil
}

// Cert file names in a kubernetes.io/tls Secret mounted as a directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// TLSConfig loads the certificate and key of certDir (tls.crt, tls.key,
// a mounted kubernetes.io/tls Secret), or, when certDir is "", makes a
// self-signed one for host (a name or an IP) at start.
func TLSConfig(certDir, host string) (*tls.Config, error) {
	var pair tls.Certificate
	var err error
	if certDir != "" {
		pair, err = tls.LoadX509KeyPair(filepath.Join(certDir, CertFile), filepath.Join(certDir, KeyFile))
		if err != nil {
			return nil, fmt.Errorf("secure metrics: certificate of %s: %w", certDir, err)
		}
	} else {
		// host is its subject and, name or IP, its SAN
		crt, key, err := cert.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("secure metrics: self-signed certificate: %w", err)
		}
		if pair, err = tls.X509KeyPair(crt, key); err != nil {
			return nil, fmt.Errorf("secure metrics: self-signed certificate: %w", err)
		}
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
