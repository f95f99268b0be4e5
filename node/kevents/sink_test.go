package kevents

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func newTestSink(t *testing.T, cs *fake.Clientset) (*Sink, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	s := NewSink(ctx, cs, "node1", reg, time.Millisecond)
	t.Cleanup(func() { s.Shutdown(); cancel() })
	return s, reg
}

func kubeEvents(t *testing.T, cs *fake.Clientset, ns string) []corev1.Event {
	t.Helper()
	l, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return l.Items
}

func TestSinkRecordsOnPodAndNode(t *testing.T) {
	cs := fake.NewClientset()
	s, _ := newTestSink(t, cs)
	s.Emit(Fact{ref, Warning, ReasonRolledBack, "ADD failed"})
	s.Emit(Fact{Object{Kind: "Node", Name: "node1"}, Warning, ReasonTeardownsHeld, "3 held"})
	require.Eventually(t, func() bool { return len(kubeEvents(t, cs, "ns")) == 1 && len(kubeEvents(t, cs, "default")) == 1 },
		5*time.Second, 10*time.Millisecond)
	e := kubeEvents(t, cs, "ns")[0]
	assert.Equal(t, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "web", UID: "u1"}, e.InvolvedObject)
	assert.Equal(t, ReasonRolledBack, e.Reason)
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, "ADD failed", e.Message)
	assert.Equal(t, corev1.EventSource{Component: Component, Host: "node1"}, e.Source)
	n := kubeEvents(t, cs, "default")[0]
	assert.Equal(t, "Node", n.InvolvedObject.Kind)
	assert.Equal(t, "node1", string(n.InvolvedObject.UID))
}

func TestSinkAggregatesRepeats(t *testing.T) {
	cs := fake.NewClientset()
	s, _ := newTestSink(t, cs)
	for range 3 {
		s.Emit(Fact{ref, Warning, ReasonTeardownHeld, "held"})
	}
	require.Eventually(t, func() bool {
		ev := kubeEvents(t, cs, "ns")
		return len(ev) == 1 && ev[0].Count == 3
	}, 5*time.Second, 10*time.Millisecond, "one event, counted three times")
}

func TestSinkCountsFailedWrites(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver down")
	})
	s, _ := newTestSink(t, cs)
	start := time.Now()
	s.Emit(Fact{ref, Normal, ReasonReclaimed, "gone"})
	assert.Less(t, time.Since(start), time.Second, "Emit does not wait for the API server")
	require.Eventually(t, func() bool { return testutil.ToFloat64(s.dropped) == 1 }, 5*time.Second, 10*time.Millisecond,
		"dropped after the broadcaster's last try")
	assert.Equal(t, float64(triesPerEvent), testutil.ToFloat64(s.errors), "each try failed and was counted")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, float64(triesPerEvent), testutil.ToFloat64(s.errors), "and no more tries: client-go's limit is triesPerEvent")
	assert.Equal(t, 1.0, testutil.ToFloat64(s.dropped))
	assert.Equal(t, 1.0, testutil.ToFloat64(s.sent.WithLabelValues(ReasonReclaimed)))
	assert.Empty(t, kubeEvents(t, cs, "ns"))
}
