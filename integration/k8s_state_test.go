package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/catena-cni/catena/libchain/events"
)

// nodeState is what the node holds for its network, as seen from outside.
type nodeState struct {
	IPs      []string // host-local allocations
	Records  []string // container IDs with a Catena record
	Veths    int      // host ends on the bridge
	Results  []string // container IDs in the libcni cache
	Iptables int      // iptables-save lines naming a container of Results or Records
}

func (s nodeState) String() string {
	return fmt.Sprintf("%d IPs, %d records, %d veths, %d libcni entries, %d iptables lines",
		len(s.IPs), len(s.Records), s.Veths, len(s.Results), s.Iptables)
}

// state observes the node now.
func (n *k8sNode) state(t *testing.T) nodeState {
	t.Helper()
	s := nodeState{IPs: n.w.ipamFiles(n.net), Veths: len(bridgePorts(t, n.w.bridge))}
	recs, err := filepath.Glob(filepath.Join(n.cacheDir(), "records", n.net, "*.json"))
	require.NoError(t, err)
	for _, r := range recs {
		id, _, _ := strings.Cut(filepath.Base(r), ":")
		s.Records = append(s.Records, id)
	}
	results, err := filepath.Glob(filepath.Join(libcniResults, n.net+"-*-eth0"))
	require.NoError(t, err)
	for _, r := range results {
		s.Results = append(s.Results, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(r), n.net+"-"), "-eth0"))
	}
	rules := run(t, "iptables-save")
	for _, id := range append(append([]string{}, s.Results...), s.Records...) {
		s.Iptables += strings.Count(rules, id)
	}
	sort.Strings(s.IPs)
	sort.Strings(s.Records)
	sort.Strings(s.Results)
	return s
}

// waitClean waits until the node holds nothing of its network: no IP,
// record, veth, libcni entry or iptables rule.
func (n *k8sNode) waitClean(t *testing.T, limit time.Duration) time.Duration {
	t.Helper()
	return waitFor(t, "the node holds nothing of network "+n.net, limit, 250*time.Millisecond, func() error {
		if s := n.state(t); len(s.IPs)+len(s.Records)+s.Veths+len(s.Results)+s.Iptables > 0 {
			return fmt.Errorf("still %s", s)
		}
		return nil
	}, n.kubelet)
}

// quietState is the node's state between two of kubelet's retries of a
// failing pod: the fewest IPs seen over up to 20 s of samples (an attempt
// in flight holds an IP, a record and a veth for a moment; what the failed
// attempts leaked stays in every sample), with no other pod running.
func (n *k8sNode) quietState(t *testing.T) nodeState {
	t.Helper()
	return n.quietStateBeside(t, 0)
}

// quietStateBeside is quietState with pods other pods running (an IP, a
// record and a veth each): sampling ends early once nothing more is seen.
func (n *k8sNode) quietStateBeside(t *testing.T, pods int) nodeState {
	t.Helper()
	best := n.state(t)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && len(best.IPs)+len(best.Records)+best.Veths > 3*pods; {
		time.Sleep(200 * time.Millisecond)
		if s := n.state(t); len(s.IPs) < len(best.IPs) || len(s.IPs) == len(best.IPs) && len(s.Records)+s.Veths < len(best.Records)+best.Veths {
			best = s
		}
	}
	return best
}

// sandboxes lists the node's pod sandboxes (any state) of pods labelled
// app=name.
func (n *k8sNode) sandboxes(t *testing.T, app string) []*cri.PodSandbox {
	t.Helper()
	list, err := n.runtime().ListPodSandbox(bg, &cri.ListPodSandboxRequest{Filter: &cri.PodSandboxFilter{
		LabelSelector: map[string]string{"app": app}}})
	require.NoError(t, err)
	return list.Items
}

// ops reads Catena's event journal on the node.
func (n *k8sNode) ops(t *testing.T) []events.Op {
	t.Helper()
	return catenaOps(t, n.cacheDir())
}

// reclaimsOf waits until the journal holds want RECLAIM operations of the
// attachments of ids, and returns them: the reconciler removes a record
// before its operation's journal line is written, so a wait for records to
// go ends a little early for the journal.
func (n *k8sNode) reclaimsOf(t *testing.T, ids []string, want int) []events.Op {
	t.Helper()
	var got []events.Op
	waitFor(t, "the reclaims journaled", 30*time.Second, 200*time.Millisecond, func() error {
		got = got[:0]
		for _, op := range n.ops(t) {
			if op.Verb == "RECLAIM" && slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(op.Attachment, id) }) {
				got = append(got, op)
			}
		}
		if len(got) < want {
			return fmt.Errorf("%d of %d reclaims journaled", len(got), want)
		}
		return nil
	}, n.kubelet)
	return got
}

// countOps counts the ops of a verb (and outcome, unless empty).
func countOps(ops []events.Op, verb, outcome string) int {
	c := 0
	for _, op := range ops {
		if op.Verb == verb && (outcome == "" || op.Outcome == outcome) {
			c++
		}
	}
	return c
}

// failerAdds counts the distinct containers failer saw ADD for in its log.
func failerAdds(t *testing.T, logFile string) int {
	t.Helper()
	raw, err := os.ReadFile(logFile)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "ADD" {
			seen[f[1]] = true
		}
	}
	return len(seen)
}

// generated is the conflist catena-agent generated in the conf dir, decoded.
func (n *k8sNode) generated(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(n.confDir(), generatedName))
	require.NoError(t, err)
	var conf map[string]any
	require.NoError(t, json.Unmarshal(raw, &conf))
	return conf
}

// summary prints a scenario's one-line summary, with its figures.
func summary(scenario, format string, args ...any) {
	// format goes to Sprintf as is, so that go vet checks every call's
	// arguments against it.
	line := fmt.Sprintf("K8S-SUMMARY %-22s %s", scenario+":", fmt.Sprintf(format, args...))
	fmt.Println(line) // in the test's output under -v; make test prints these lines
}
