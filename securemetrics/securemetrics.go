// Package securemetrics serves the agent's /metrics over HTTPS behind the
// API server's authentication and authorization, as kubelet does: a bearer
// token is checked with a TokenReview, then the user with a
// SubjectAccessReview of get on the non-resource URL /metrics. It uses
// k8s.io/apiserver's delegating authenticator and authorizer (with their
// caches) and answers as kubelet's server does: 401 to a request not
// authenticated (no token, a token the API server rejects, a review that
// failed), 403 to a user not allowed.
package securemetrics

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
)

// reviewBackoff is how a TokenReview or SubjectAccessReview is retried:
// k8s.io/apiserver's DefaultAuthWebhookRetryBackoff.
func reviewBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// Handler serves next's GET /metrics to the clients that the API server
// at cfg authenticates (401 otherwise) and authorizes to get /metrics
// (403 otherwise); every other path is 404 to an authorized client.
func Handler(cfg *rest.Config, metrics http.Handler, log *slog.Logger) (http.Handler, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("secure metrics: client of the API server: %w", err)
	}
	authnClient, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("secure metrics: TokenReview client: %w", err)
	}
	authzClient, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("secure metrics: SubjectAccessReview client: %w", err)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  authnClient,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      reviewBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("secure metrics: authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authzClient,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       reviewBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("secure metrics: authorizer: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	return &guard{authn: authn, authz: authz, next: mux, log: log}, nil
}

// guard authenticates and authorizes each request before next serves it.
type guard struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	next  http.Handler
	log   *slog.Logger
}

var _ http.Handler = (*guard)(nil)

func (g *guard) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	res, ok, err := g.authn.AuthenticateRequest(req)
	if err != nil || !ok {
		// as kubelet: whatever failed, the client is not authenticated
		if err != nil {
			g.log.Debug("secure metrics: request not authenticated", "remote", req.RemoteAddr, "error", err.Error())
		}
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
	decision, reason, err := g.authz.Authorize(req.Context(), attrs)
	if err != nil {
		g.log.Warn("secure metrics: authorization failed", "user", res.User.GetName(), "path", req.URL.Path, "error", err.Error())
		http.Error(w, "Authorization of user "+res.User.GetName()+" failed", http.StatusInternalServerError)
		return
	}
	if decision != authorizer.DecisionAllow {
		g.log.Debug("secure metrics: request forbidden", "user", res.User.GetName(), "path", req.URL.Path, "reason", reason)
		http.Error(w, "Forbidden: user "+res.User.GetName()+" may not get "+req.URL.Path, http.StatusForbidden)
		return
	}
	g.next.ServeHTTP(w, req)
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
