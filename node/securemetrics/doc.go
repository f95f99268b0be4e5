// Package securemetrics serves the agent's /metrics over HTTPS behind the
// API server's authentication and authorization, as kubelet does: a bearer
// token is checked with a TokenReview, then the user with a
// SubjectAccessReview of get on the non-resource URL /metrics. It keeps
// the TokenReviews' answers in its own cache (an accepted token 30 s, so a
// revoked one is refused within that), uses k8s.io/apiserver's delegating
// authorizer (with its cache) and answers as kubelet's server does: 401 to a request not
// authenticated (no token, a token the API server rejects, a review that
// failed), 403 to a user not allowed. The reviews a client can cause are
// bounded (limits): 429 to a request beyond them.
//
// Files:
//
//	doc.go            this comment
//	securemetrics.go  Handler and TLSConfig: the authenticated /metrics wired, its limits and the reviews' backoff
//	guard.go          the guard: each request authenticated and authorized before /metrics serves it, or 401, 403, 429
//	review.go         the TokenReview authenticator, retried, whose rejections the token cache keeps
//	tokencache.go     the token cache: each token's answer for its TTL, one review at a time per token
//	limits.go         the per-source token buckets, the source behind a trusted proxy, the known-good tokens that skip them
package securemetrics
