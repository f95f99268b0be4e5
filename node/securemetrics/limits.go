package securemetrics

import (
	"crypto/sha256"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// sourceLimiter holds a token bucket per source of requests whose token is
// not known good. A source is an IPv4 address or an IPv6 /64 (what one
// host usually holds): behind a NAT every client shares its address's
// bucket, unless the NAT is a trusted proxy (clientSource). When maxSources are tracked, the idle ones (their
// bucket full again, as a new one) are dropped, at most once a second; a
// new source beyond them is refused.
type sourceLimiter struct {
	every rate.Limit
	burst int
	max   int

	mu    sync.Mutex
	m     map[netip.Prefix]*rate.Limiter
	swept time.Time
}

func newSourceLimiter(every rate.Limit, burst, maxSources int) *sourceLimiter {
	return &sourceLimiter{every: every, burst: burst, max: maxSources, m: map[netip.Prefix]*rate.Limiter{}}
}

// allow takes one request from src's bucket; false when it is empty.
func (s *sourceLimiter) allow(src netip.Prefix, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.m[src]
	if !ok {
		if len(s.m) >= s.max && now.Sub(s.swept) >= time.Second {
			s.swept = now
			for k, l := range s.m {
				if l.TokensAt(now) >= float64(s.burst) {
					delete(s.m, k)
				}
			}
		}
		if len(s.m) >= s.max {
			return false
		}
		l = rate.NewLimiter(s.every, s.burst)
		s.m[src] = l
	}
	return l.AllowN(now, 1)
}

// sourceOf is the source of a request from remoteAddr (ip:port): its IPv4
// address, or its IPv6 address's /64; the zero Prefix when it does not
// parse (all such requests share one bucket).
func sourceOf(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	return prefixOf(ap.Addr())
}

// prefixOf is the source of address a: itself (IPv4), or its /64 (IPv6).
func prefixOf(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

// clientSource is the source whose budget a request takes: that of its
// remote address (sourceOf), unless the remote address is in trusted, a
// proxy the operator named: then that of the last address of its
// X-Forwarded-For that is not in trusted, the client the proxy saw (a
// client can put anything before it, never after). A trusted proxy's
// request with no such address, or whose next hop does not parse, is the
// proxy's own.
func clientSource(req *http.Request, trusted []netip.Prefix) netip.Prefix {
	own := sourceOf(req.RemoteAddr)
	if ap, err := netip.ParseAddrPort(req.RemoteAddr); err != nil || !inAny(trusted, ap.Addr()) {
		return own
	}
	hops := strings.Split(strings.Join(req.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return own
		}
		if !inAny(trusted, a) {
			return prefixOf(a)
		}
	}
	return own
}

// inAny reports whether a is in one of ps.
func inAny(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// goodKey names a token (by its SHA-256) with the method and path it was
// allowed.
type goodKey struct {
	token        [sha256.Size]byte
	method, path string
}

func newGoodKey(token, method, path string) goodKey {
	return goodKey{token: sha256.Sum256([]byte(token)), method: method, path: path}
}

// knownGood remembers the tokens allowed for a method and path, each until
// ttl after its last request allowed, at most max of them. Only a request
// allowed adds one, so a client without a valid token cannot fill it.
type knownGood struct {
	ttl time.Duration
	max int

	mu    sync.Mutex
	until map[goodKey]time.Time
}

func newKnownGood(ttl time.Duration, maxKeys int) *knownGood {
	return &knownGood{ttl: ttl, max: maxKeys, until: map[goodKey]time.Time{}}
}

func (k *knownGood) has(key goodKey, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	until, ok := k.until[key]
	return ok && now.Before(until)
}

// remember makes key known good until ttl from now; when max are held
// and none has expired, key is not remembered.
func (k *knownGood) remember(key goodKey, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.until[key]; !ok && len(k.until) >= k.max {
		for old, until := range k.until {
			if !now.Before(until) {
				delete(k.until, old)
			}
		}
		if len(k.until) >= k.max {
			return
		}
	}
	k.until[key] = now.Add(k.ttl)
}

func (k *knownGood) forget(key goodKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.until, key)
}
