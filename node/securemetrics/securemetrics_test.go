package securemetrics

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
)

// fakeAPI answers TokenReviews (token "bound" is user "scraper",
// "unbound" is "stranger", anything else unauthenticated with the error
// the API server gives, "invalid bearer token") and SubjectAccessReviews
// (only scraper may get the non-resource URL /metrics). A TokenReview of
// any other token waits for hold when hold is not nil.
type fakeAPI struct {
	*httptest.Server
	hold chan struct{}

	mu           sync.Mutex
	tokenReviews map[string]int
	sars         int
	revoked      map[string]bool // tokens no longer authenticated
}

// revoke makes the API server stop authenticating token, as deleting its
// ServiceAccount or Secret does.
func (f *fakeAPI) revoke(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[token] = true
}

func newFakeAPI(t *testing.T, hold chan struct{}) *fakeAPI {
	t.Helper()
	f := &fakeAPI{hold: hold, tokenReviews: map[string]int{}, revoked: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if !decodeReview(t, r, &tr) {
			return
		}
		f.mu.Lock()
		f.tokenReviews[tr.Spec.Token]++
		revoked := f.revoked[tr.Spec.Token]
		f.mu.Unlock()
		users := map[string]string{"bound": "scraper", "unbound": "stranger"}
		if u, ok := users[tr.Spec.Token]; ok && !revoked {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u}}
		} else {
			if f.hold != nil {
				select {
				case <-f.hold:
				case <-r.Context().Done():
				}
			}
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		assert.NoError(t, json.NewEncoder(w).Encode(&tr))
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		var sar authzv1.SubjectAccessReview
		if !decodeReview(t, r, &sar) {
			return
		}
		f.mu.Lock()
		f.sars++
		f.mu.Unlock()
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "scraper" && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		w.Header().Set("Content-Type", "application/json")
		assert.NoError(t, json.NewEncoder(w).Encode(&sar))
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// decodeReview decodes the review the client sent, JSON or protobuf (the
// typed clients prefer it), into into.
func decodeReview(t *testing.T, r *http.Request, into runtime.Object) bool {
	body, err := io.ReadAll(r.Body)
	if !assert.NoError(t, err) {
		return false
	}
	_, _, err = scheme.Codecs.UniversalDeserializer().Decode(body, nil, into)
	return assert.NoError(t, err, "content type %s", r.Header.Get("Content-Type"))
}

// reviews is how many TokenReviews of token the fake answered, and how
// many reviews of any kind (TokenReviews and SubjectAccessReviews).
func (f *fakeAPI) reviews(token string) (of, all int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, n := range f.tokenReviews {
		all += n
		if k == token {
			of = n
		}
	}
	return of, all + f.sars
}

func TestHandlerAuthenticatesAndAuthorizes(t *testing.T) {
	api := newFakeAPI(t, nil)
	series := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "catena_up 1\n") })
	h, err := Handler(&rest.Config{Host: api.URL}, series, slog.New(slog.DiscardHandler), Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tests := []struct {
		name, token, path string
		want              int
	}{
		{"bound account", "bound", "/metrics", http.StatusOK},
		{"no binding", "unbound", "/metrics", http.StatusForbidden},
		{"no token", "", "/metrics", http.StatusUnauthorized},
		// a token the TokenReview rejects: 401, as kubelet answers
		{"bad token", "forged", "/metrics", http.StatusUnauthorized},
		{"other path, authorized user", "bound", "/readyz", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
			require.NoError(t, err)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, tt.want, resp.StatusCode, string(body))
			if tt.want == http.StatusOK {
				assert.Equal(t, "catena_up 1\n", string(body))
			} else {
				assert.NotContains(t, string(body), "catena_up")
			}
		})
	}
	_, all := api.reviews("")
	assert.Positive(t, all, "the API server was asked")
}

func TestTLSConfigSelfSigned(t *testing.T) {
	cfg, err := TLSConfig("", "192.0.2.7")
	require.NoError(t, err)
	require.Len(t, cfg.Certificates, 1)
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	require.NoError(t, err)
	require.Len(t, leaf.IPAddresses, 1)
	assert.Equal(t, "192.0.2.7", leaf.IPAddresses[0].String())
	assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
}

func TestTLSConfigFromSecretDir(t *testing.T) {
	dir := t.TempDir()
	crt, key, err := cert.GenerateSelfSignedCertKey("catena.example", nil, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, CertFile), crt, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, KeyFile), key, 0o600))
	cfg, err := TLSConfig(dir, "192.0.2.7")
	require.NoError(t, err)
	blk, _ := pem.Decode(crt)
	require.NotNil(t, blk)
	assert.Equal(t, blk.Bytes, cfg.Certificates[0].Certificate[0], "the Secret's certificate, not a new one")

	_, err = TLSConfig(t.TempDir(), "192.0.2.7")
	assert.ErrorContains(t, err, "certificate of", "an empty Secret dir fails, never falls back")
}
