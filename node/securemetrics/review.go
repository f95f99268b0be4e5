package securemetrics

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/util/webhook"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// tokenReviewer authenticates a bearer token with a TokenReview, retried
// as k8s.io/apiserver's webhook authenticator retries it. Unlike that
// authenticator, a token the API server does not authenticate is an answer
// (false, no error) even when the review's status carries the reason (the
// API server always gives one: "invalid bearer token"), so that the token
// cache keeps it for its rejected TTL; only a review that failed is an
// error, never cached.
type tokenReviewer struct {
	reviews authenticationv1.TokenReviewInterface
	timeout time.Duration
	backoff wait.Backoff
	log     *slog.Logger
}

var _ authenticator.Token = (*tokenReviewer)(nil)

func (r *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var res *authnv1.TokenReview
	err := webhook.WithExponentialBackoff(ctx, r.backoff, func() error {
		var err error
		res, err = r.reviews.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	}, webhook.DefaultShouldRetry)
	if err != nil {
		return nil, false, fmt.Errorf("secure metrics: TokenReview: %w", err)
	}
	st := res.Status
	if !st.Authenticated {
		r.log.Debug("secure metrics: the API server does not authenticate a token", "reason", st.Error)
		return nil, false, nil
	}
	var extra map[string][]string
	if st.User.Extra != nil {
		extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			extra[k] = v
		}
	}
	return &authenticator.Response{User: &user.DefaultInfo{
		Name:   st.User.Username,
		UID:    st.User.UID,
		Groups: withAuthenticated(st.User.Username, st.User.Groups),
		Extra:  extra,
	}}, true, nil
}

// withAuthenticated adds system:authenticated to the groups of a user
// other than system:anonymous, unless they hold it or
// system:unauthenticated, as k8s.io/apiserver's AuthenticatedGroupAdder.
func withAuthenticated(name string, groups []string) []string {
	if name == user.Anonymous || slices.Contains(groups, user.AllAuthenticated) || slices.Contains(groups, user.AllUnauthenticated) {
		return groups
	}
	return append(slices.Clip(groups), user.AllAuthenticated)
}
