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
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
)

// fakeAPIServer answers TokenReviews (token "bound" is user "scraper",
// "unbound" is "stranger", anything else unauthenticated) and
// SubjectAccessReviews (only scraper may get the non-resource URL /metrics).
func fakeAPIServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var reviews atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		var tr authnv1.TokenReview
		if !assert.NoError(t, json.NewDecoder(r.Body).Decode(&tr)) {
			return
		}
		users := map[string]string{"bound": "scraper", "unbound": "stranger"}
		if u, ok := users[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u}}
		}
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		assert.NoError(t, json.NewEncoder(w).Encode(&tr))
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		var sar authzv1.SubjectAccessReview
		if !assert.NoError(t, json.NewDecoder(r.Body).Decode(&sar)) {
			return
		}
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "scraper" && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		w.Header().Set("Content-Type", "application/json")
		assert.NoError(t, json.NewEncoder(w).Encode(&sar))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &reviews
}

func TestHandlerAuthenticatesAndAuthorizes(t *testing.T) {
	api, reviews := fakeAPIServer(t)
	series := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "catena_up 1\n") })
	h, err := Handler(&rest.Config{Host: api.URL}, series, slog.New(slog.DiscardHandler))
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
	assert.Positive(t, reviews.Load(), "the API server was asked")
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
