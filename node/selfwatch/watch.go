package selfwatch

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// DefaultGetTimeout bounds Gone's GET: the pod's termination grace period
// (10 s in the chart) must also cover the removal after it.
const DefaultGetTimeout = 3 * time.Second

// Watch follows one DaemonSet. Run it for the agent's life; ask Gone as it
// stops.
type Watch struct {
	Client          kubernetes.Interface
	Namespace, Name string
	Log             *slog.Logger
	// GetTimeout bounds Gone's GET (default DefaultGetTimeout).
	GetTimeout time.Duration

	mu sync.Mutex
	// uid is the DaemonSet seen present ("": never seen); deleted says it
	// was then deleted or marked for deletion.
	uid     types.UID
	deleted string
}

// ParseTarget splits "<namespace>/<name>".
func ParseTarget(s string) (namespace, name string, err error) {
	ns, n, ok := strings.Cut(s, "/")
	if !ok || ns == "" || n == "" || strings.Contains(n, "/") {
		return "", "", fmt.Errorf("%q: want <namespace>/<daemonset>", s)
	}
	return ns, n, nil
}

// Run watches the DaemonSet until ctx is done.
func (w *Watch) Run(ctx context.Context) error {
	sel := fields.OneTermEqualSelector("metadata.name", w.Name).String()
	dss := w.Client.AppsV1().DaemonSets(w.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return dss.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return dss.Watch(ctx, o)
		},
	}
	// The client says whether it serves watch-list (a fake does not), as
	// client-go's own informers tell the reflector.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, w.Client), &appsv1.DaemonSet{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: w.observeDelete,
	}); err != nil {
		return fmt.Errorf("watching daemonset %s/%s: %w", w.Namespace, w.Name, err)
	}
	inf.RunWithContext(ctx)
	return nil
}

func (w *Watch) observe(obj any) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Name != w.Name {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.uid != ds.UID {
		w.uid, w.deleted = ds.UID, ""
	}
	if ds.DeletionTimestamp != nil && w.deleted == "" {
		w.deleted = "is being deleted"
		w.logf("its daemonset is being deleted")
	}
}

func (w *Watch) observeDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Name != w.Name {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.uid == ds.UID {
		w.deleted = "was deleted"
		w.logf("its daemonset was deleted")
	}
}

func (w *Watch) logf(msg string) {
	if w.Log != nil {
		w.Log.Info(msg, "daemonset", w.Namespace+"/"+w.Name)
	}
}

// Gone says whether the DaemonSet is gone for good, and why; every doubt
// is false. ctx bounds the GET it may make (with GetTimeout).
func (w *Watch) Gone(ctx context.Context) (bool, string) {
	name := "daemonset " + w.Namespace + "/" + w.Name
	w.mu.Lock()
	uid, deleted := w.uid, w.deleted
	w.mu.Unlock()
	switch {
	case uid == "":
		return false, name + " was never seen: not a pod of it"
	case deleted != "":
		return true, name + " " + deleted
	}
	d := w.GetTimeout
	if d <= 0 {
		d = DefaultGetTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	ds, err := w.Client.AppsV1().DaemonSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, name + " is not found"
	case err != nil:
		return false, fmt.Sprintf("%s: cannot tell whether it was deleted: %v", name, err)
	case ds.UID != uid:
		return false, name + " was re-created: its new pods take over"
	case ds.DeletionTimestamp != nil:
		return true, name + " is being deleted"
	}
	return false, name + " is present: a rollout, a drain or a restart"
}
