package securemetrics

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"path/filepath"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
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

// reviewTimeout bounds one TokenReview, its retries included.
const reviewTimeout = 10 * time.Second

// limits bound the work a client of the endpoint makes the API server do.
type limits struct {
	// reviewQPS and reviewBurst are the client-side rate of each review
	// client (one for TokenReviews, one for SubjectAccessReviews), in
	// place of client-go's default 5/s, burst 10.
	reviewQPS   float32
	reviewBurst int
	// tokenTTL is how long an accepted token is cached, rejectedTTL a
	// token the API server does not authenticate, at most maxTokens of
	// them; a review that failed is not cached. allowTTL and denyTTL are
	// the same for a user's access.
	tokenTTL, rejectedTTL, allowTTL, denyTTL time.Duration
	maxTokens                                int
	// perSource and sourceBurst limit the requests of one source (an IPv4
	// address, an IPv6 /64) whose token is not known good; at most
	// maxSources are tracked at once.
	perSource   rate.Limit
	sourceBurst int
	maxSources  int
	// maxInFlight is how many requests whose token is not known good are
	// authenticated and authorized at once.
	maxInFlight int
	// knownGoodFor is how long a token stays known good for a method and
	// path after the last request allowed, for at most maxKnownGood of them.
	knownGoodFor time.Duration
	maxKnownGood int
	// now is the token cache's clock; nil means time.Now.
	now func() time.Time
}

// defaultLimits are the agent's. An accepted token is kept 30 s: a token
// the API server stops authenticating (its ServiceAccount or Secret
// deleted) is refused within 30 s, while a Prometheus scraping every 15 s
// costs each node one TokenReview every other scrape.
func defaultLimits() limits {
	return limits{
		reviewQPS: 20, reviewBurst: 40,
		tokenTTL: 30 * time.Second, rejectedTTL: 10 * time.Second, maxTokens: 4096,
		allowTTL: 5 * time.Minute, denyTTL: 30 * time.Second,
		perSource: 1, sourceBurst: 5, maxSources: 4096,
		maxInFlight:  16,
		knownGoodFor: 10 * time.Minute, maxKnownGood: 1024,
	}
}

// Options are the endpoint's settings beyond its fixed limits.
type Options struct {
	// TrustedProxies are the addresses of proxies (or SNATs that set
	// X-Forwarded-For) whose forwarded client address, the last hop of
	// X-Forwarded-For not among them, is the source of a request's budget
	// instead of the proxy's own. Only a connection from one of them is
	// believed; none by default.
	TrustedProxies []netip.Prefix
}

// Handler serves next's GET /metrics to the clients that the API server
// at cfg authenticates (401 otherwise) and authorizes to get /metrics
// (403 otherwise); every other path is 404 to an authorized client. A
// request whose token is not known good, beyond its source's budget or
// the reviews in flight, is 429 without asking the API server.
func Handler(cfg *rest.Config, metrics http.Handler, log *slog.Logger, opts Options) (http.Handler, error) {
	return newHandler(cfg, metrics, log, defaultLimits(), opts)
}

func newHandler(cfg *rest.Config, metrics http.Handler, log *slog.Logger, lim limits, opts Options) (http.Handler, error) {
	// the review clients' own rate, whatever the agent's client has
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = lim.reviewQPS, lim.reviewBurst, nil
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
	reviewer := &tokenReviewer{reviews: authnClient.TokenReviews(), timeout: reviewTimeout, backoff: *reviewBackoff(), log: log}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authzClient,
		AllowCacheTTL:             lim.allowTTL,
		DenyCacheTTL:              lim.denyTTL,
		WebhookRetryBackoff:       reviewBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("secure metrics: authorizer: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	now := lim.now
	if now == nil {
		now = time.Now
	}
	return &guard{
		authn:    newTokenCache(reviewer, lim.tokenTTL, lim.rejectedTTL, lim.maxTokens, now),
		authz:    authz,
		next:     mux,
		log:      log,
		good:     newKnownGood(lim.knownGoodFor, lim.maxKnownGood),
		sources:  newSourceLimiter(lim.perSource, lim.sourceBurst, lim.maxSources),
		trusted:  opts.TrustedProxies,
		inFlight: make(chan struct{}, lim.maxInFlight),
	}, nil
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
