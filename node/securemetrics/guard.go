package securemetrics

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// guard authenticates and authorizes each request before next serves it.
// A request whose token is known good for its method and path (allowed
// within knownGoodFor) goes straight to the caches; any other first passes
// its source's limiter and takes one of inFlight's slots, or is 429.
type guard struct {
	authn   authenticator.Token
	authz   authorizer.Authorizer
	next    http.Handler
	log     *slog.Logger
	good    *knownGood
	sources *sourceLimiter
	// trusted are the proxies whose X-Forwarded-For names the source
	// (clientSource).
	trusted  []netip.Prefix
	inFlight chan struct{}
}

var _ http.Handler = (*guard)(nil)

func (g *guard) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	token := bearerToken(req)
	if token == "" {
		// nothing to review
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	key := newGoodKey(token, req.Method, req.URL.Path)
	if !g.good.has(key, time.Now()) {
		release, why := g.admit(req)
		if release == nil {
			g.log.Debug("secure metrics: request refused", "remote", req.RemoteAddr, "reason", why)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too Many Requests: "+why, http.StatusTooManyRequests)
			return
		}
		defer release()
	}
	res, ok, err := g.authn.AuthenticateToken(req.Context(), token)
	if err != nil || !ok {
		// as kubelet: whatever failed, the client is not authenticated
		if err != nil {
			g.log.Debug("secure metrics: request not authenticated", "remote", req.RemoteAddr, "error", err.Error())
		} else {
			g.good.forget(key)
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
		g.good.forget(key)
		g.log.Debug("secure metrics: request forbidden", "user", res.User.GetName(), "path", req.URL.Path, "reason", reason)
		http.Error(w, "Forbidden: user "+res.User.GetName()+" may not get "+req.URL.Path, http.StatusForbidden)
		return
	}
	g.good.remember(key, time.Now())
	// as k8s.io/apiserver's bearer token authenticator: next never sees it
	req.Header.Del("Authorization")
	g.next.ServeHTTP(w, req)
}

// admit takes the source's budget and a slot of inFlight for a request
// whose token is not known good; it returns the slot's release, or nil and
// why not.
func (g *guard) admit(req *http.Request) (release func(), why string) {
	if !g.sources.allow(clientSource(req, g.trusted), time.Now()) {
		return nil, "too many requests from this address whose token is not known good"
	}
	select {
	case g.inFlight <- struct{}{}:
		return func() { <-g.inFlight }, ""
	default:
		return nil, "too many requests being authenticated"
	}
}

// bearerToken is the token of the request's "Authorization: Bearer"
// header, parsed as k8s.io/apiserver's bearer token authenticator does; ""
// when there is none.
func bearerToken(req *http.Request) string {
	auth := strings.TrimSpace(req.Header.Get("Authorization"))
	parts := strings.SplitN(auth, " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") {
		return ""
	}
	return parts[1]
}
