package securemetrics

import (
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// clientFrom is an HTTP client whose connections come from the local
// address src (on Linux every address of 127.0.0.0/8 is local).
func clientFrom(t *testing.T, src string) *http.Client {
	t.Helper()
	tr := &http.Transport{
		DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext,
		MaxIdleConnsPerHost: 16,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// scrape GETs url with token as the bearer token; it returns the status
// and the response's headers.
func scrape(c *http.Client, url, token string) (int, http.Header, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header, resp.Body.Close()
}

// sources are n loopback addresses from 127.0.0.<first>.
func sources(first, n int) []string {
	srcs := make([]string, n)
	for i := range srcs {
		srcs[i] = fmt.Sprintf("127.0.0.%d", first+i)
	}
	return srcs
}

// flood GETs url with a new random token, from perSource goroutines on
// each of srcs, until the returned stop is called; stop waits for them and
// returns how many answers had each status.
func flood(t *testing.T, url string, srcs []string, perSource int) (stop func() map[int]int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for _, src := range srcs {
		c := clientFrom(t, src)
		for range perSource {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					code, _, err := scrape(c, url, rand.Text())
					if err != nil {
						code = -1
					}
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}
			})
		}
	}
	var once sync.Once
	stop = func() map[int]int {
		once.Do(func() { close(done); wg.Wait() })
		mu.Lock()
		defer mu.Unlock()
		return codes
	}
	t.Cleanup(func() { stop() })
	return stop
}

// A flood of random tokens from several addresses must not starve a
// valid token: its first scrape during the flood is reviewed and served,
// and so are the next ones.
func TestFloodDoesNotStarveAValidToken(t *testing.T) {
	api := newFakeAPI(t, nil)
	series := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "catena_up 1\n") })
	h, err := Handler(&rest.Config{Host: api.URL}, series, slog.New(slog.DiscardHandler), Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	stop := flood(t, srv.URL+"/metrics", sources(2, 4), 20)
	require.Eventually(t, func() bool { _, all := api.reviews(""); return all >= 10 },
		10*time.Second, 10*time.Millisecond, "the flood reaches the API server")
	prom := clientFrom(t, "127.0.0.1")
	var got []int
	for range 5 {
		start := time.Now()
		code, _, err := scrape(prom, srv.URL+"/metrics", "bound")
		require.NoError(t, err)
		got = append(got, code)
		t.Logf("valid scrape: %d in %v", code, time.Since(start).Round(time.Millisecond))
		time.Sleep(100 * time.Millisecond)
	}
	codes := stop()
	_, all := api.reviews("")
	t.Logf("flood answers by status: %v; reviews the API server answered: %d", codes, all)
	assert.Equal(t, []int{200, 200, 200, 200, 200}, got, "the valid token's scrapes during the flood")
}
