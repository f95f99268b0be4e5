package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/catena-cni/catena/kevents"
)

// agentManifest is nodeManifest for deploy/catena.yaml's agent, which also
// reaches the API server for its events: this cluster has no kube-proxy,
// so the kubernetes Service's address is replaced by the API server's own
// (127.0.0.1, on the host network), as a node without kube-proxy would.
func (c *k8sCluster) agentManifest(t *testing.T, manifest []byte, tag string) []any {
	t.Helper()
	objs := c.node.nodeManifest(t, manifest, tag)
	for _, o := range objs {
		ds, ok := o.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		for i := range ds.Spec.Template.Spec.Containers {
			ctr := &ds.Spec.Template.Spec.Containers[i]
			ctr.Env = append(ctr.Env,
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(c.apiPort)})
		}
	}
	return objs
}

// podEvents lists the agent's events of one reason on the pods of a
// Deployment (named <deployment>-...) in default.
func (c *k8sCluster) podEvents(deployment, reason string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := c.getJSON(&list, "events", "-n", "default", "--field-selector", "reason="+reason); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && strings.HasPrefix(e.InvolvedObject.Name, deployment+"-") &&
			e.Source.Component == kevents.Component && e.Source.Host == c.node.name {
			out = append(out, e)
		}
	}
	return out, nil
}

// waitPodEvent waits until the agent recorded an event of reason on a pod
// of deployment, and returns the events.
func (c *k8sCluster) waitPodEvent(t *testing.T, deployment, reason string, timeout time.Duration) []corev1.Event {
	t.Helper()
	var evs []corev1.Event
	waitFor(t, fmt.Sprintf("a %s event on a pod of %s", reason, deployment), timeout, time.Second, func() error {
		var err error
		if evs, err = c.podEvents(deployment, reason); err != nil {
			return err
		}
		if len(evs) == 0 {
			return fmt.Errorf("no %s event on %s's pods yet", reason, deployment)
		}
		return nil
	})
	return evs
}

// checkPodEvent checks the agent's events of reason on deployment's pods:
// of type typ, with a message that names each of want, on a pod with its
// namespace and name and, where the runtime passed K8S_POD_UID, its UID.
func checkPodEvent(t *testing.T, evs []corev1.Event, typ string, want ...string) {
	t.Helper()
	require.NotEmpty(t, evs)
	for _, e := range evs {
		assert.Equal(t, typ, e.Type, "%s: %s", e.Reason, e.Message)
		assert.Equal(t, "default", e.InvolvedObject.Namespace)
		assert.Positive(t, e.Count)
		for _, w := range want {
			assert.Contains(t, e.Message, w)
		}
	}
}
