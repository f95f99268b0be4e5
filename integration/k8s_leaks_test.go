package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/catena-cni/catena/node/leaks"
)

// leaks: the IPs the plain primary's seed failure leaked before Catena
// was installed are seen by the agent (catena_leaks, a Warning on the
// Node) once its ConfigMap asks for a scan every 5 s with no minimum age,
// then found by `catenactl leaks` and released by `catenactl repair
// --from-report`, both run by kubectl exec in the agent's pod; the running
// pods keep their IPs. The keys are removed and the agent restarted after.
func (r *k8sRun) leaks(t *testing.T) {
	require.NotEmpty(t, r.plainLeaks, "the plain primary's seed failure left its leaks")
	running := slices.DeleteFunc(r.n.state(t).IPs, func(ip string) bool { return slices.Contains(r.plainLeaks, ip) })
	keys := map[string]string{"CATENA_AGENT_LEAK_INTERVAL": "5s", "CATENA_AGENT_LEAK_MIN_AGE": "0s"}
	r.patchOptions(t, keys)
	r.restartAgentUntil(t, "the agent counts the plain primary's leaks", func(fams metricFamilies) error {
		if got := sampleSum(fams, "catena_leaks", "kind=host-local"); got != float64(len(r.plainLeaks)) {
			return fmt.Errorf("catena_leaks{kind=host-local} %v, want %d", got, len(r.plainLeaks))
		}
		return nil
	})
	var warning string
	waitFor(t, "a CatenaLeaksFound Warning on the Node", time.Minute, time.Second, func() error {
		var list corev1.EventList
		if err := r.c.getJSON(&list, "events", "-n", "default", "--field-selector", "reason=CatenaLeaksFound"); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == r.n.name && e.Type == corev1.EventTypeWarning {
				warning = e.Message
				return nil
			}
		}
		return fmt.Errorf("%d events, none on the Node yet", len(list.Items))
	}, r.n.kubelet)
	assert.Contains(t, warning, fmt.Sprintf("%d leaks Catena did not make", len(r.plainLeaks)))

	pod, args := r.agentPodArgs(t)
	exec := func(sub ...string) string {
		return r.c.kubectl(t, nil, append([]string{"exec", "-n", "catena-system", pod, "--", "/catenactl"}, append(sub, args...)...)...)
	}
	report := func(name string) *leaks.Report {
		out := exec("leaks", "--json", "--min-age", "0s", "--output", args[1]+"/"+name)
		var rep leaks.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		return &rep
	}
	r1 := report("leaks-1.json")
	var found []string
	for _, f := range r1.Leaks() {
		if f.Kind == leaks.KindHostLocal {
			found = append(found, f.Item)
		}
	}
	assert.ElementsMatch(t, r.plainLeaks, found, "the report finds exactly the leaked IPs")
	time.Sleep(1100 * time.Millisecond)
	report("leaks-2.json")
	out := exec("repair", "--from-report", args[1]+"/leaks-1.json", "--from-report", args[1]+"/leaks-2.json", "--confirm-after", "1s", "--min-age", "0s")
	t.Logf("catenactl repair --from-report in the agent's pod:\n%s", out)
	assert.Contains(t, out, fmt.Sprintf("%d released, 0 failed", len(r.plainLeaks)))
	assert.ElementsMatch(t, running, r.n.state(t).IPs, "only the running pods' IPs are held")

	r.removeOptions(t, keys)
	r.restartAgentUntil(t, "the agent back to its defaults", func(metricFamilies) error { return nil })
	summary("leaks", "the plain primary leaked %d IPs before the install; the agent counted %d and warned on the Node; catenactl leaks in its pod found %d, repair --from-report released %d through bridge's DEL; %d running pods kept their IPs",
		len(r.plainLeaks), len(r.plainLeaks), len(found), len(r.plainLeaks), len(running))
	r.plainLeaks = nil
}

// agentPodArgs are the agent pod's name and catenactl's flags for its
// dirs: --cache-dir (second: the reports go there), --cni-conf-dir,
// --results-dir and --cni-path (the agent's --cni-bin-dir), as the
// DaemonSet passes them to the agent, and --runtime-endpoint as its
// ConfigMap does, unless auto.
func (r *k8sRun) agentPodArgs(t *testing.T) (string, []string) {
	t.Helper()
	pods := r.c.pods(t, "catena-system", "app.kubernetes.io/component=agent")
	require.Len(t, pods, 1)
	flags := map[string]string{}
	for _, a := range pods[0].Spec.Containers[0].Args {
		if k, v, ok := strings.Cut(a, "="); ok {
			flags[k] = v
		}
	}
	args := []string{"--cache-dir", flags["--cache-dir"], "--cni-conf-dir", flags["--cni-conf-dir"], "--results-dir", flags["--results-dir"],
		"--cni-path", flags["--cni-bin-dir"]}
	// The runtime's socket, as the agent's option names it: catenactl's
	// auto looks where the chart's defaults mount it, which this node's
	// values move.
	var cm corev1.ConfigMap
	require.NoError(t, r.c.getJSON(&cm, "configmap", "-n", "catena-system", "catena-options"))
	if ep := cm.Data["CATENA_AGENT_RUNTIME_ENDPOINT"]; ep != "" && ep != "auto" {
		args = append(args, "--runtime-endpoint", ep)
	}
	return pods[0].Name, args
}

// patchOptions sets keys in catena-options; removeOptions removes them.
func (r *k8sRun) patchOptions(t *testing.T, keys map[string]string) {
	t.Helper()
	var data []string
	for k, v := range keys {
		data = append(data, fmt.Sprintf("%q:%q", k, v))
	}
	slices.Sort(data)
	r.c.kubectl(t, nil, "patch", "configmap", "catena-options", "-n", "catena-system", "--type=merge", "-p", `{"data":{`+strings.Join(data, ",")+`}}`)
}

func (r *k8sRun) removeOptions(t *testing.T, keys map[string]string) {
	t.Helper()
	var ops []string
	for k := range keys {
		ops = append(ops, fmt.Sprintf(`{"op":"remove","path":"/data/%s"}`, k))
	}
	slices.Sort(ops)
	r.c.kubectl(t, nil, "patch", "configmap", "catena-options", "-n", "catena-system", "--type=json", "-p", "["+strings.Join(ops, ",")+"]")
}
