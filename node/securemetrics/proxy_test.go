package securemetrics

import (
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

// TestClientSource: only a connection from a trusted proxy has its
// X-Forwarded-For believed, and then only its last hop that is not a
// trusted proxy, which the proxy itself appended.
func TestClientSource(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ff::/48")}
	for _, tc := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"no proxy trusted: the remote address", "192.0.2.9:4242", []string{"198.51.100.1"}, "192.0.2.9/32"},
		{"a trusted proxy: its client", "10.1.2.3:4242", []string{"198.51.100.1"}, "198.51.100.1/32"},
		{"the last untrusted hop, whatever the client put before it", "10.1.2.3:4242", []string{"203.0.113.7, 198.51.100.1"}, "198.51.100.1/32"},
		{"trusted hops skipped, headers joined", "10.1.2.3:4242", []string{"198.51.100.1", "10.9.9.9"}, "198.51.100.1/32"},
		{"an IPv6 client: its /64", "[2001:db8:ff::1]:4242", []string{"2001:db8:1:2::7"}, "2001:db8:1:2::/64"},
		{"no header: the proxy's own", "10.1.2.3:4242", nil, "10.1.2.3/32"},
		{"a hop that does not parse: the proxy's own", "10.1.2.3:4242", []string{"198.51.100.1, junk"}, "10.1.2.3/32"},
		{"only trusted hops: the proxy's own", "10.1.2.3:4242", []string{"10.4.4.4"}, "10.1.2.3/32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			assert.Equal(t, netip.MustParsePrefix(tc.want), clientSource(req, trusted))
			if tc.remote == "192.0.2.9:4242" {
				return
			}
			assert.Equal(t, sourceOf(tc.remote), clientSource(req, nil), "no proxy trusted: X-Forwarded-For is ignored")
		})
	}
}

// TestSourceBudgetBehindProxy: behind a proxy every client shares the
// proxy's bucket; once the proxy is trusted, each client the proxy names
// has its own, and a client cannot get a fresh one by forging the header
// through an untrusted address.
func TestSourceBudgetBehindProxy(t *testing.T) {
	admitted := func(g *guard, remote, xff string) bool {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.RemoteAddr = remote
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		release, _ := g.admit(req)
		if release == nil {
			return false
		}
		release()
		return true
	}
	newGuard := func(trusted ...netip.Prefix) *guard {
		return &guard{sources: newSourceLimiter(rate.Every(time.Hour), 1, 16), trusted: trusted, inFlight: make(chan struct{}, 4)}
	}

	g := newGuard()
	assert.True(t, admitted(g, "10.1.2.3:1000", "198.51.100.1"))
	assert.False(t, admitted(g, "10.1.2.3:1001", "198.51.100.2"), "not trusted: one bucket for every client of the proxy")

	g = newGuard(netip.MustParsePrefix("10.1.2.3/32"))
	assert.True(t, admitted(g, "10.1.2.3:1000", "198.51.100.1"))
	assert.True(t, admitted(g, "10.1.2.3:1001", "198.51.100.2"), "trusted: a bucket per client")
	assert.False(t, admitted(g, "10.1.2.3:1002", "203.0.113.9, 198.51.100.1"), "the client's forged hop is not its source")
	assert.True(t, admitted(g, "192.0.2.9:1000", "198.51.100.3"))
	assert.False(t, admitted(g, "192.0.2.9:1001", "198.51.100.4"), "an untrusted address cannot name its source")
}
