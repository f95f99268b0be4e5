package securemetrics

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// tokenCache keeps the answers of a token authenticator (the TokenReview)
// by the token's SHA-256: an accepted token for okTTL, a rejected one for
// rejectedTTL; a review that failed (an error) is not kept. Those asking
// about a token while its review runs wait for that review's answer. At
// most max answers are kept: when full, the expired ones are dropped, and
// an answer beyond them is not kept. now is its clock.
type tokenCache struct {
	next               authenticator.Token
	okTTL, rejectedTTL time.Duration
	max                int
	now                func() time.Time
	mu                 sync.Mutex
	answers            map[[sha256.Size]byte]tokenAnswer
	running            map[[sha256.Size]byte]*review
}

var _ authenticator.Token = (*tokenCache)(nil)

type tokenAnswer struct {
	res   *authenticator.Response
	ok    bool
	until time.Time
}

// review is a TokenReview in flight: done closes once a and err are set.
type review struct {
	done chan struct{}
	a    tokenAnswer
	err  error
}

func newTokenCache(next authenticator.Token, okTTL, rejectedTTL time.Duration, maxTokens int, now func() time.Time) *tokenCache {
	return &tokenCache{next: next, okTTL: okTTL, rejectedTTL: rejectedTTL, max: maxTokens, now: now,
		answers: map[[sha256.Size]byte]tokenAnswer{}, running: map[[sha256.Size]byte]*review{}}
}

// AuthenticateToken implements authenticator.Token. The review runs
// without the caller's cancellation (its own timeout bounds it), so that
// one client leaving fails no other waiting for the same token.
func (c *tokenCache) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	if a, ok := c.answers[key]; ok && c.now().Before(a.until) {
		c.mu.Unlock()
		return a.res, a.ok, nil
	}
	r, waiting := c.running[key]
	if !waiting {
		r = &review{done: make(chan struct{})}
		c.running[key] = r
	}
	c.mu.Unlock()
	if waiting {
		select {
		case <-r.done:
			return r.a.res, r.a.ok, r.err
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	res, ok, err := c.next.AuthenticateToken(context.WithoutCancel(ctx), token)
	r.a, r.err = tokenAnswer{res: res, ok: ok}, err
	c.mu.Lock()
	delete(c.running, key)
	if err == nil {
		c.keep(key, r.a)
	}
	c.mu.Unlock()
	close(r.done)
	return res, ok, err
}

// keep stores a's answer for its TTL, mu held.
func (c *tokenCache) keep(key [sha256.Size]byte, a tokenAnswer) {
	now := c.now()
	if _, ok := c.answers[key]; !ok && len(c.answers) >= c.max {
		for k, old := range c.answers {
			if !now.Before(old.until) {
				delete(c.answers, k)
			}
		}
		if len(c.answers) >= c.max {
			return
		}
	}
	ttl := c.rejectedTTL
	if a.ok {
		ttl = c.okTTL
	}
	a.until = now.Add(ttl)
	c.answers[key] = a
}
