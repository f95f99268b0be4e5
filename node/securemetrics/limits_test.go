package securemetrics

import (
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

func TestSourceOf(t *testing.T) {
	tests := []struct{ remote, want string }{
		{"192.0.2.7:4242", "192.0.2.7/32"},
		{"[::ffff:192.0.2.7]:4242", "192.0.2.7/32"},
		{"[2001:db8:1:2:aaaa::1]:4242", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:4242", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:4242", "fe80::/64"},
	}
	for _, tt := range tests {
		t.Run(tt.remote, func(t *testing.T) {
			assert.Equal(t, netip.MustParsePrefix(tt.want), sourceOf(tt.remote))
		})
	}
	assert.Equal(t, netip.Prefix{}, sourceOf("not an address"))
}

func TestSourceLimiter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	a, b, c := netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("192.0.2.2/32"), netip.MustParsePrefix("192.0.2.3/32")
	s := newSourceLimiter(rate.Every(time.Second), 2, 2)

	assert.True(t, s.allow(a, now))
	assert.True(t, s.allow(a, now))
	assert.False(t, s.allow(a, now), "a's burst is spent")
	assert.True(t, s.allow(b, now), "b has its own bucket")
	assert.False(t, s.allow(c, now), "a third source beyond maxSources, none idle")

	now = now.Add(time.Second)
	assert.True(t, s.allow(c, now), "b's bucket is full again: b is dropped for c")
	assert.Equal(t, []netip.Prefix{a, c}, slices.SortedFunc(maps.Keys(s.m), netip.Prefix.Compare), "a kept: its bucket is not full")
	assert.True(t, s.allow(a, now), "a refilled one")
	assert.False(t, s.allow(a, now))

	now = now.Add(500 * time.Millisecond)
	assert.False(t, s.allow(b, now), "b is new again, a and c are not idle")
}

func TestKnownGood(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	k := newKnownGood(time.Minute, 2)
	one, two, three := newGoodKey("one", "GET", "/metrics"), newGoodKey("two", "GET", "/metrics"), newGoodKey("three", "GET", "/metrics")

	k.remember(one, now)
	assert.True(t, k.has(one, now))
	assert.False(t, k.has(newGoodKey("one", "GET", "/other"), now), "known good for its path only")
	assert.False(t, k.has(one, now.Add(time.Minute)), "expired after ttl")

	k.remember(two, now.Add(30*time.Second))
	k.remember(three, now.Add(30*time.Second))
	assert.False(t, k.has(three, now.Add(30*time.Second)), "full, none expired: not remembered")
	k.remember(three, now.Add(time.Minute))
	assert.True(t, k.has(three, now.Add(time.Minute)), "one's expiry made room")

	k.forget(three)
	assert.False(t, k.has(three, now.Add(time.Minute)))
}
