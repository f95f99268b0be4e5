package selfwatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func daemonSet(name string, uid types.UID) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "catena-system", Name: name, UID: uid}}
}

// started runs w until the test ends and waits until it has seen what
// seen says.
func started(t *testing.T, w *Watch, seen func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, seen, 5*time.Second, 10*time.Millisecond)
}

func (w *Watch) seenUID() types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.uid
}

func TestGone(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// change runs once the watch has seen the DaemonSet "a" (uid 1).
		change   func(t *testing.T, cs *fake.Clientset)
		want     bool
		wantWhy  string
		noSeeing bool // the DaemonSet never exists
	}{
		{name: "present: a rollout", change: func(*testing.T, *fake.Clientset) {}, want: false, wantWhy: "is present"},
		{name: "deleted, then its RBAC", change: func(t *testing.T, cs *fake.Clientset) {
			require.NoError(t, cs.AppsV1().DaemonSets("catena-system").Delete(ctx, "a", metav1.DeleteOptions{}))
			// The watch saw it: the GET that would now fail is not needed.
			cs.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("forbidden")
			})
		}, want: true, wantWhy: "was deleted"},
		{name: "being deleted (foreground)", change: func(t *testing.T, cs *fake.Clientset) {
			ds := daemonSet("a", "1")
			now := metav1.Now()
			ds.DeletionTimestamp = &now
			_, err := cs.AppsV1().DaemonSets("catena-system").Update(ctx, ds, metav1.UpdateOptions{})
			require.NoError(t, err)
		}, want: true, wantWhy: "is being deleted"},
		{name: "re-created under another uid", change: func(t *testing.T, cs *fake.Clientset) {
			require.NoError(t, cs.AppsV1().DaemonSets("catena-system").Delete(ctx, "a", metav1.DeleteOptions{}))
			_, err := cs.AppsV1().DaemonSets("catena-system").Create(ctx, daemonSet("a", "2"), metav1.CreateOptions{})
			require.NoError(t, err)
		}, want: false, wantWhy: "present"},
		{name: "another daemonset deleted", change: func(t *testing.T, cs *fake.Clientset) {
			require.NoError(t, cs.AppsV1().DaemonSets("catena-system").Delete(ctx, "b", metav1.DeleteOptions{}))
		}, want: false, wantWhy: "is present"},
		{name: "never seen: no daemonset", noSeeing: true, want: false, wantWhy: "never seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if !tc.noSeeing {
				objs = append(objs, daemonSet("a", "1"), daemonSet("b", "3"))
			}
			cs := fake.NewClientset(objs...)
			w := &Watch{Client: cs, Namespace: "catena-system", Name: "a"}
			if tc.noSeeing {
				started(t, w, func() bool { return true })
				time.Sleep(100 * time.Millisecond)
			} else {
				started(t, w, func() bool { return w.seenUID() == "1" })
				tc.change(t, cs)
				// The watch catches up; Gone's GET covers a lagging one.
				time.Sleep(200 * time.Millisecond)
			}
			gone, why := w.Gone(ctx)
			assert.Equal(t, tc.want, gone, why)
			assert.Contains(t, why, tc.wantWhy)
			assert.Contains(t, why, "daemonset catena-system/a")
		})
	}
}

// TestGoneGet: a deletion the watch has not delivered yet is found by the
// GET; a GET that fails keeps.
func TestGoneGet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reactor k8stesting.ReactionFunc
		want    bool
		wantWhy string
	}{
		{"not found", nil, true, "is not found"},
		{"the API refuses", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("unauthorized")
		}, false, "cannot tell whether it was deleted: unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			if tc.reactor != nil {
				cs.PrependReactor("get", "daemonsets", tc.reactor)
			}
			w := &Watch{Client: cs, Namespace: "catena-system", Name: "a"}
			w.observe(daemonSet("a", "1")) // as the watch saw it once
			gone, why := w.Gone(context.Background())
			assert.Equal(t, tc.want, gone, why)
			assert.Contains(t, why, tc.wantWhy)
		})
	}
}

func TestParseTarget(t *testing.T) {
	ns, name, err := ParseTarget("catena-system/catena-agent")
	require.NoError(t, err)
	assert.Equal(t, []string{"catena-system", "catena-agent"}, []string{ns, name})
	for _, bad := range []string{"", "catena-agent", "/a", "a/", "a/b/c"} {
		_, _, err := ParseTarget(bad)
		assert.Error(t, err, bad)
	}
}
