package nodebench

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Pod is one pod's timeline: when the watch events that moved it on were
// received. A zero time is a step not seen.
type Pod struct {
	Name string
	UID  types.UID
	// Created is the first event of the pod (its ADDED)
	Created time.Time
	// Scheduled is the first with PodScheduled True
	Scheduled time.Time
	// SandboxReady is the first with PodReadyToStartContainers True: the
	// sandbox is made and its network set up
	SandboxReady time.Time
	// Ready is the first with Ready True
	Ready time.Time
	// Deleting is the first with a deletionTimestamp
	Deleting time.Time
	// Gone is its DELETED
	Gone time.Time
}

// Tracker builds the pods' timelines from a pod watch, safely from the
// goroutine that receives the events while another reads it.
type Tracker struct {
	mu   sync.Mutex
	pods map[types.UID]*Pod
	errs []string
}

// NewTracker is a Tracker with no pod yet.
func NewTracker() *Tracker {
	return &Tracker{pods: map[types.UID]*Pod{}}
}

// Observe takes one event of the watch, received at at. An Error event
// is kept (Errors); a bookmark or an object that is no pod is ignored.
func (tr *Tracker) Observe(ev watch.Event, at time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if ev.Type == watch.Error {
		msg := fmt.Sprintf("%v", ev.Object)
		if st, ok := ev.Object.(*metav1.Status); ok {
			msg = st.Message
		}
		tr.errs = append(tr.errs, msg)
		return
	}
	p, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
		return
	}
	tl := tr.pods[p.UID]
	if tl == nil {
		tl = &Pod{Name: p.Name, UID: p.UID, Created: at}
		tr.pods[p.UID] = tl
	}
	first := func(ts *time.Time, now bool) {
		if now && ts.IsZero() {
			*ts = at
		}
	}
	first(&tl.Scheduled, conditionTrue(p, corev1.PodScheduled))
	first(&tl.SandboxReady, conditionTrue(p, corev1.PodReadyToStartContainers))
	first(&tl.Ready, conditionTrue(p, corev1.PodReady))
	first(&tl.Deleting, p.DeletionTimestamp != nil || ev.Type == watch.Deleted)
	first(&tl.Gone, ev.Type == watch.Deleted)
}

func conditionTrue(p *corev1.Pod, typ corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Pods are the timelines so far, by creation then name.
func (tr *Tracker) Pods() []Pod {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]Pod, 0, len(tr.pods))
	for _, p := range tr.pods {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Pod) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// Counts are how many pods were seen, have been Ready and are gone.
type Counts struct {
	Seen, Ready, Gone int
}

// Counts counts the pods so far.
func (tr *Tracker) Counts() Counts {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var c Counts
	for _, p := range tr.pods {
		c.Seen++
		if !p.Ready.IsZero() {
			c.Ready++
		}
		if !p.Gone.IsZero() {
			c.Gone++
		}
	}
	return c
}

// Errors are the messages of the watch's Error events.
func (tr *Tracker) Errors() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.errs)
}
