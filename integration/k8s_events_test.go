package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/catena-cni/catena/node/kevents"
)

// agentManifest is nodeManifest for deploy/catena.yaml's agent, which also
// reaches the API server for its events: this cluster has no kube-proxy,
// so the kubernetes Service's address is replaced by the API server's own
// (127.0.0.1, on the host network), as a node without kube-proxy would.
func (c *k8sCluster) agentManifest(t *testing.T, manifest []byte, tag string) []any {
	t.Helper()
	return c.agentManifestOn(t, c.node, manifest, tag)
}

// agentManifestOn is agentManifest for node n.
func (c *k8sCluster) agentManifestOn(t *testing.T, n *k8sNode, manifest []byte, tag string) []any {
	t.Helper()
	objs := n.nodeManifest(t, manifest, tag)
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
// Deployment (named <deployment>-...) in default, from the agent of node.
func (c *k8sCluster) podEvents(node, deployment, reason string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := c.getJSON(&list, "events", "-n", "default", "--field-selector", "reason="+reason); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && strings.HasPrefix(e.InvolvedObject.Name, deployment+"-") &&
			e.Source.Component == kevents.Component && e.Source.Host == node {
			out = append(out, e)
		}
	}
	return out, nil
}

// waitPodEvent waits until the agent recorded an event of reason on a pod
// of deployment, and returns the events.
func (c *k8sCluster) waitPodEvent(t *testing.T, deployment, reason string, timeout time.Duration) []corev1.Event {
	t.Helper()
	return c.waitPodEventOn(t, c.node.name, deployment, reason, timeout)
}

// waitPodEventOn is waitPodEvent for the agent of node.
func (c *k8sCluster) waitPodEventOn(t *testing.T, node, deployment, reason string, timeout time.Duration) []corev1.Event {
	t.Helper()
	var evs []corev1.Event
	waitFor(t, fmt.Sprintf("a %s event on a pod of %s", reason, deployment), timeout, time.Second, func() error {
		var err error
		if evs, err = c.podEvents(node, deployment, reason); err != nil {
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

// secureScrape: the agent's HTTPS /metrics on the node's address answers
// the token of a ServiceAccount bound to a ClusterRole allowing get on
// /metrics with Catena's series, the token of one without the binding
// with 403, no token with 401; the plain port is not served there. The
// tokens are minted by the TokenRequest API (`kubectl create token`), as
// the kubelet mints a pod's: the authentication is the same; the scrape is
// made from the host, since the node's images have no HTTP client.
func (r *k8sRun) secureScrape(t *testing.T) {
	const ns = "default"
	r.c.apply(t, []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns}},
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: "stranger", Namespace: ns}},
		&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: "catena-metrics-reader"},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "catena-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "catena-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}}},
	})
	t.Cleanup(func() {
		_, _ = r.c.kubectlErr(nil, "delete", "clusterrolebinding,clusterrole", "catena-metrics-reader", "--ignore-not-found")
		_, _ = r.c.kubectlErr(nil, "delete", "serviceaccount", "scraper", "stranger", "-n", ns, "--ignore-not-found")
	})
	token := func(sa string) string {
		return strings.TrimSpace(r.c.kubectl(t, nil, "create", "token", sa, "-n", ns))
	}
	bound, unbound := token("scraper"), token("stranger")
	// the agent's --node-ip is its pod's status.hostIP: the Node's InternalIP
	var node corev1.Node
	require.NoError(t, r.c.getJSON(&node, "node", r.c.node.name))
	nodeIP := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	require.NotEmpty(t, nodeIP, "the Node's InternalIP")
	url := "https://" + net.JoinHostPort(nodeIP, "9618") + "/metrics"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// the agent's certificate is self-signed at its start (no Secret
		// given): its chain is not what this checks
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	get := func(tok string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	var body string
	// the RBAC cache of a fresh binding: allow a few seconds
	waitFor(t, "the bound ServiceAccount scrapes Catena's series", time.Minute, time.Second, func() error {
		code, b, err := get(bound)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", code, b)
		}
		body = b
		return nil
	})
	assert.Contains(t, body, "catena_operations_total")
	code, b, err := get(unbound)
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, code, b)
	assert.NotContains(t, b, "catena_")
	code, b, err = get("")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, b)
	// a token the API server rejects: a bound one with its signature cut
	code, b, err = get(bound[:strings.LastIndexByte(bound, '.')+1] + "forged")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, b)
	assert.NotContains(t, b, "catena_")
	_, err = (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(nodeIP, "9617") + "/metrics")
	assert.Error(t, err, "the plain port listens on 127.0.0.1 only")
	summary("secure scrape", "%s: bound ServiceAccount 200 with Catena's series, unbound 403, no token 401, a forged token 401; plain :9617 not reachable on %s",
		url, nodeIP)
}
