package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// kubectlErr runs the pinned kubectl as admin, with stdin, and returns its
// stdout (stderr too on failure).
func (c *k8sCluster) kubectlErr(stdin []byte, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bins, "kubectl"), append([]string{"--kubeconfig=" + c.kubeconfigs["admin"],
		"--cache-dir=" + filepath.Join(c.home, "cache"), "--request-timeout=30s"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+c.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("kubectl %v: %w: %s", args, err, stderr.String())
	}
	return stdout.String(), nil
}

// kubectl is kubectlErr that requires success.
func (c *k8sCluster) kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, err := c.kubectlErr(stdin, args...)
	require.NoError(t, err)
	return out
}

// getJSON decodes `kubectl get ... -o json` into obj.
func (c *k8sCluster) getJSON(obj any, args ...string) error {
	out, err := c.kubectlErr(nil, append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(out), obj)
}

// apply re-encodes typed objects as YAML documents and applies them.
func (c *k8sCluster) apply(t *testing.T, objs []any) {
	t.Helper()
	var docs [][]byte
	for _, o := range objs {
		raw, err := yaml.Marshal(o)
		require.NoError(t, err)
		docs = append(docs, raw)
	}
	c.kubectl(t, bytes.Join(docs, []byte("---\n")), "apply", "-f", "-")
}

// nodeReady is nil once the node's Ready condition is True.
func (c *k8sCluster) nodeReady(t *testing.T) error {
	return c.nodeReadyNamed(c.node.name)
}

// nodeReadyNamed is nil once node name's Ready condition is True.
func (c *k8sCluster) nodeReadyNamed(name string) error {
	var node corev1.Node
	if err := c.getJSON(&node, "node", name); err != nil {
		return err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s: Ready=%s: %s", name, cond.Status, cond.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", name)
}

// pods lists the pods of namespace ns matching selector.
func (c *k8sCluster) pods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	require.NoError(t, c.getJSON(&list, "pods", "-n", ns, "-l", selector))
	return list.Items
}

// runningIPs are the pod IPs of the pods that are Running and Ready; err
// says what is not, so that it reads in a timeout.
func runningIPs(pods []corev1.Pod) ([]string, error) {
	var ips []string
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return nil, fmt.Errorf("pod %s is %s (IP %q)", p.Name, p.Status.Phase, p.Status.PodIP)
		}
		ips = append(ips, p.Status.PodIP)
	}
	return ips, nil
}

// webDeployment is the workload: replicas of the local pause image, on the
// pod network (no host network), no service-account token.
func webDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	no := false
	grace := int64(2)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  &no,
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name: "pause", Image: pauseImage, ImagePullPolicy: corev1.PullNever,
						Command: []string{"/pause"},
					}},
				},
			},
		},
	}
}

// scale sets a Deployment's replicas.
func (c *k8sCluster) scale(t *testing.T, name string, replicas int) {
	t.Helper()
	c.kubectl(t, nil, "scale", "deployment", name, "-n", "default", "--replicas="+strconv.Itoa(replicas))
}

// cniStatus is containerd's view of its CNI config (the CRI Status's
// cniconfig), or "" when it does not answer.
func (d *containerd) cniStatus() string {
	st, err := d.rt.Status(bg, &cri.StatusRequest{Verbose: true})
	if err != nil {
		return ""
	}
	return st.GetInfo()["cniconfig"]
}
