package nodebench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

var t0 = time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// pod is a pod of uid with the conditions given True (and, with
// deleting, a deletionTimestamp).
func pod(uid string, deleting bool, trueConds ...corev1.PodConditionType) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "density-" + uid, UID: types.UID(uid)}}
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodReady} {
		st := corev1.ConditionFalse
		for _, tc := range trueConds {
			if tc == c {
				st = corev1.ConditionTrue
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: st})
	}
	if deleting {
		now := metav1.NewTime(t0)
		p.DeletionTimestamp = &now
	}
	return p
}

type event struct {
	ms  int
	typ watch.EventType
	obj *corev1.Pod
}

func TestTrackerTimeline(t *testing.T) {
	const sched, sandbox, ready = corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodReady
	tests := []struct {
		name   string
		events []event
		want   Pod
		spans  map[Measure]time.Duration // absent: not measured
	}{
		{name: "every step, one event each",
			events: []event{
				{0, watch.Added, pod("a", false)},
				{5, watch.Modified, pod("a", false, sched)},
				{300, watch.Modified, pod("a", false, sched, sandbox)},
				{350, watch.Modified, pod("a", false, sched, sandbox, ready)},
				{400, watch.Modified, pod("a", false, sched, sandbox, ready)},
				{1000, watch.Modified, pod("a", true, sched, sandbox, ready)},
				{1500, watch.Modified, pod("a", true, sched)},
				{3000, watch.Deleted, pod("a", true, sched)},
			},
			want: Pod{Name: "density-a", UID: "a", Created: at(0), Scheduled: at(5), SandboxReady: at(300), Ready: at(350), Deleting: at(1000), Gone: at(3000)},
			spans: map[Measure]time.Duration{createdScheduled: 5 * time.Millisecond, scheduledSandbox: 295 * time.Millisecond,
				sandboxReady: 50 * time.Millisecond, CreatedReady: 350 * time.Millisecond, deleteGone: 2 * time.Second}},
		{name: "sandbox and Ready in one status update",
			events: []event{
				{0, watch.Added, pod("b", false, sched)},
				{200, watch.Modified, pod("b", false, sched, sandbox, ready)},
			},
			want: Pod{Name: "density-b", UID: "b", Created: at(0), Scheduled: at(0), SandboxReady: at(200), Ready: at(200)},
			spans: map[Measure]time.Duration{createdScheduled: 0, scheduledSandbox: 200 * time.Millisecond, sandboxReady: 0,
				CreatedReady: 200 * time.Millisecond}},
		{name: "the first True counts, not a later flap",
			events: []event{
				{0, watch.Added, pod("c", false, sched, sandbox, ready)},
				{50, watch.Modified, pod("c", false, sched, sandbox)},
				{90, watch.Modified, pod("c", false, sched, sandbox, ready)},
			},
			want:  Pod{Name: "density-c", UID: "c", Created: at(0), Scheduled: at(0), SandboxReady: at(0), Ready: at(0)},
			spans: map[Measure]time.Duration{createdScheduled: 0, scheduledSandbox: 0, sandboxReady: 0, CreatedReady: 0}},
		{name: "deleted before it was Ready: no start measure but scheduling",
			events: []event{
				{0, watch.Added, pod("d", false)},
				{10, watch.Modified, pod("d", false, sched)},
				{20, watch.Deleted, pod("d", false, sched)},
			},
			want:  Pod{Name: "density-d", UID: "d", Created: at(0), Scheduled: at(10), Deleting: at(20), Gone: at(20)},
			spans: map[Measure]time.Duration{createdScheduled: 10 * time.Millisecond, deleteGone: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker()
			for _, e := range tc.events {
				tr.Observe(watch.Event{Type: e.typ, Object: e.obj}, at(e.ms))
			}
			pods := tr.Pods()
			require.Len(t, pods, 1)
			assert.Equal(t, tc.want, pods[0])
			for _, m := range append(podMeasures, KubeletStartSLI) {
				got, ok := pods[0].span(m)
				want, measured := tc.spans[m]
				assert.Equal(t, measured, ok, m.Label)
				assert.Equal(t, want, got, m.Label)
			}
		})
	}
}

func TestTrackerCountsAndErrors(t *testing.T) {
	tr := NewTracker()
	tr.Observe(watch.Event{Type: watch.Added, Object: pod("b", false)}, at(2))
	tr.Observe(watch.Event{Type: watch.Added, Object: pod("a", false)}, at(1))
	tr.Observe(watch.Event{Type: watch.Added, Object: pod("c", false)}, at(1))
	tr.Observe(watch.Event{Type: watch.Modified, Object: pod("a", false, corev1.PodReady)}, at(3))
	tr.Observe(watch.Event{Type: watch.Modified, Object: pod("b", false, corev1.PodReady)}, at(4))
	tr.Observe(watch.Event{Type: watch.Deleted, Object: pod("a", true)}, at(5))
	tr.Observe(watch.Event{Type: watch.Bookmark, Object: pod("z", false)}, at(6))
	tr.Observe(watch.Event{Type: watch.Modified, Object: &corev1.Node{}}, at(6))
	tr.Observe(watch.Event{Type: watch.Error, Object: &metav1.Status{Message: "too old resource version"}}, at(7))

	assert.Equal(t, Counts{Seen: 3, Ready: 2, Gone: 1}, tr.Counts(), "a bookmark and a node are no pods")
	var names []string
	for _, p := range tr.Pods() {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"density-a", "density-c", "density-b"}, names, "by creation, then name")
	assert.Equal(t, []string{"too old resource version"}, tr.Errors())
}

func TestPodDists(t *testing.T) {
	pods := []Pod{
		{Created: at(0), Scheduled: at(10), SandboxReady: at(100), Ready: at(120), Deleting: at(500), Gone: at(900)},
		{Created: at(0), Scheduled: at(20), SandboxReady: at(300), Ready: at(330)},
		{Created: at(0)},
	}
	d := PodDists(pods)
	assert.Equal(t, []time.Duration{120 * time.Millisecond, 330 * time.Millisecond}, d[CreatedReady.ID].samples)
	assert.Equal(t, []time.Duration{400 * time.Millisecond}, d[deleteGone.ID].samples)
	assert.Len(t, d, len(podMeasures))
}
