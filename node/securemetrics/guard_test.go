package securemetrics

import (
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"

	"github.com/catena-cni/catena/internal/testclock"
)

// guarded serves a metrics handler behind newHandler(lim) asking api.
func guarded(t *testing.T, api *fakeAPI, lim limits) string {
	t.Helper()
	series := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "catena_up 1\n") })
	h, err := newHandler(&rest.Config{Host: api.URL}, series, slog.New(slog.DiscardHandler), lim, Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// status is the status of a scrape of url with token by c.
func status(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	code, _, err := scrape(c, url, token)
	require.NoError(t, err)
	return code
}

// The API server's answer for a token it does not authenticate (with its
// reason, as it always gives one) is cached for the rejected TTL; an
// accepted token for the token TTL.
func TestAnswersCached(t *testing.T) {
	api := newFakeAPI(t, nil)
	lim := defaultLimits()
	lim.rejectedTTL, lim.perSource = 300*time.Millisecond, rate.Inf
	url := guarded(t, api, lim)
	c := clientFrom(t, "127.0.0.1")

	for range 3 {
		assert.Equal(t, http.StatusUnauthorized, status(t, c, url, "forged"))
	}
	of, _ := api.reviews("forged")
	assert.Equal(t, 1, of, "TokenReviews of a rejected token asked again within the rejected TTL")
	time.Sleep(400 * time.Millisecond)
	assert.Equal(t, http.StatusUnauthorized, status(t, c, url, "forged"))
	of, _ = api.reviews("forged")
	assert.Equal(t, 2, of, "reviewed again after the rejected TTL")

	for range 3 {
		assert.Equal(t, http.StatusOK, status(t, c, url, "bound"))
	}
	of, _ = api.reviews("bound")
	assert.Equal(t, 1, of, "TokenReviews of an accepted token asked again")
}

// A source beyond its budget of requests whose token is not known good is
// 429, without a review; other sources, known good tokens and requests
// without a token are not affected.
func TestSourceBudget(t *testing.T) {
	api := newFakeAPI(t, nil)
	lim := defaultLimits()
	lim.perSource, lim.sourceBurst = rate.Every(time.Hour), 3
	url := guarded(t, api, lim)
	flooder := clientFrom(t, "127.0.0.2")

	assert.Equal(t, http.StatusOK, status(t, flooder, url, "bound"), "1 of 3: now known good")
	assert.Equal(t, http.StatusUnauthorized, status(t, flooder, url, rand.Text()), "2 of 3")
	assert.Equal(t, http.StatusUnauthorized, status(t, flooder, url, rand.Text()), "3 of 3")
	_, before := api.reviews("")

	code, hdr, err := scrape(flooder, url, rand.Text())
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, "1", hdr.Get("Retry-After"))
	assert.Equal(t, http.StatusTooManyRequests, status(t, flooder, url, "forged"))
	_, after := api.reviews("")
	assert.Equal(t, before, after, "no review beyond the budget")

	assert.Equal(t, http.StatusOK, status(t, flooder, url, "bound"), "a known good token from the same source")
	assert.Equal(t, http.StatusUnauthorized, status(t, flooder, url, ""), "no token: nothing to review, 401")
	assert.Equal(t, http.StatusUnauthorized, status(t, clientFrom(t, "127.0.0.3"), url, rand.Text()), "another source")
}

// Beyond maxInFlight requests being authenticated, a request whose token
// is not known good is 429 at once, without a review; a known good token
// is served meanwhile.
func TestInFlightBound(t *testing.T) {
	hold := make(chan struct{})
	api := newFakeAPI(t, hold)
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold) }) })
	lim := defaultLimits()
	lim.maxInFlight = 2
	url := guarded(t, api, lim)
	assert.Equal(t, http.StatusOK, status(t, clientFrom(t, "127.0.0.1"), url, "bound"))

	var wg sync.WaitGroup
	held := make([]int, 2)
	for i, src := range sources(2, 2) {
		c := clientFrom(t, src)
		wg.Go(func() {
			code, _, err := scrape(c, url, rand.Text())
			assert.NoError(t, err)
			held[i] = code
		})
	}
	require.Eventually(t, func() bool { _, all := api.reviews(""); return all >= 2+2 },
		10*time.Second, 10*time.Millisecond, "two reviews held (after bound's TokenReview and SubjectAccessReview)")

	code, hdr, err := scrape(clientFrom(t, "127.0.0.4"), url, rand.Text())
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, "1", hdr.Get("Retry-After"))
	assert.Equal(t, http.StatusOK, status(t, clientFrom(t, "127.0.0.5"), url, "bound"), "a known good token does not wait")
	_, all := api.reviews("")
	assert.Equal(t, 4, all, "no review for the refused request or the known good token")

	release.Do(func() { close(hold) })
	wg.Wait()
	assert.Equal(t, []int{http.StatusUnauthorized, http.StatusUnauthorized}, held)
}

// TestRevokedTokenRefusedWithinBound: a token the API server stops
// authenticating keeps its access only while its accepted answer is
// cached: 30 s, the bound docs/observability.md states; then it is 401.
func TestRevokedTokenRefusedWithinBound(t *testing.T) {
	api := newFakeAPI(t, nil)
	clock := testclock.New(time.Unix(1_000_000, 0))
	lim := defaultLimits()
	lim.now = clock.Now
	url := guarded(t, api, lim)
	c := clientFrom(t, "127.0.0.1")

	require.Equal(t, http.StatusOK, status(t, c, url, "bound"))
	api.revoke("bound")
	clock.Advance(30*time.Second - time.Millisecond)
	assert.Equal(t, http.StatusOK, status(t, c, url, "bound"), "still cached")
	of, _ := api.reviews("bound")
	assert.Equal(t, 1, of)
	clock.Advance(time.Millisecond)
	assert.Equal(t, http.StatusUnauthorized, status(t, c, url, "bound"), "revoked: refused once its answer expired")
	of, _ = api.reviews("bound")
	assert.Equal(t, 2, of, "reviewed again")
}
