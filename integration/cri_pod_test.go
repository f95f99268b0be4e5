package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/catena-cni/catena/libchain/events"
)

// podConfig is a sandbox with pod network, unique metadata, and hostPort
// mapped to port 80 when hostPort is not 0.
func (d *containerd) podConfig(name string, hostPort int32) *cri.PodSandboxConfig {
	uid := fmt.Sprintf("%s-%d-%d", name, os.Getpid(), seq.Add(1))
	cfg := &cri.PodSandboxConfig{
		Metadata:     &cri.PodSandboxMetadata{Name: name, Uid: uid, Namespace: "catena-it"},
		Hostname:     name,
		LogDirectory: d.dir + "/logs/" + uid,
		Linux: &cri.LinuxPodSandboxConfig{SecurityContext: &cri.LinuxSandboxSecurityContext{
			NamespaceOptions: &cri.NamespaceOption{Network: cri.NamespaceMode_POD},
		}},
	}
	if hostPort != 0 {
		cfg.PortMappings = []*cri.PortMapping{{Protocol: cri.Protocol_TCP, ContainerPort: 80, HostPort: hostPort}}
	}
	return cfg
}

// runPod runs a sandbox and returns its ID (the CNI container ID).
func (d *containerd) runPod(cfg *cri.PodSandboxConfig) (string, error) {
	resp, err := d.rt.RunPodSandbox(bg, &cri.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", err
	}
	return resp.PodSandboxId, nil
}

// podStatus is the sandbox's state and IP as the CRI reports them.
func (d *containerd) podStatus(id string) (cri.PodSandboxState, string, error) {
	st, err := d.rt.PodSandboxStatus(bg, &cri.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return 0, "", err
	}
	return st.GetStatus().GetState(), st.GetStatus().GetNetwork().GetIp(), nil
}

func (d *containerd) stopPod(id string) error {
	_, err := d.rt.StopPodSandbox(bg, &cri.StopPodSandboxRequest{PodSandboxId: id})
	return err
}

func (d *containerd) removePod(id string) error {
	_, err := d.rt.RemovePodSandbox(bg, &cri.RemovePodSandboxRequest{PodSandboxId: id})
	return err
}

// pods lists the IDs of the sandboxes containerd still knows.
func (d *containerd) pods() []string {
	d.t.Helper()
	list, err := d.rt.ListPodSandbox(bg, &cri.ListPodSandboxRequest{})
	if err != nil {
		d.t.Fatalf("ListPodSandbox: %v", err)
	}
	var ids []string
	for _, sb := range list.GetItems() {
		ids = append(ids, sb.Id)
	}
	return ids
}

// networkReady is the CRI Status call's NetworkReady condition.
func (d *containerd) networkReady() (bool, string) {
	d.t.Helper()
	st, err := d.rt.Status(bg, &cri.StatusRequest{})
	if err != nil {
		d.t.Fatalf("CRI Status: %v", err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.Type == cri.NetworkReady {
			return c.Status, strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	d.t.Fatalf("CRI Status has no %s condition: %v", cri.NetworkReady, st)
	return false, ""
}

// catenaOps reads the operations Catena journaled in cacheDir, oldest
// first; a last line without its newline is one still being appended, and
// is left for the next read.
func catenaOps(t *testing.T, cacheDir string) []events.Op {
	t.Helper()
	raw, err := os.ReadFile(events.Path(cacheDir))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
	if len(raw) == 0 {
		return nil
	}
	var ops []events.Op
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var op events.Op
		require.NoError(t, json.Unmarshal([]byte(line), &op), "event line %q", line)
		ops = append(ops, op)
	}
	return ops
}

// opsFor keeps the ops of one verb on attachments of container id.
func opsFor(ops []events.Op, verb, id string) []events.Op {
	var out []events.Op
	for _, op := range ops {
		if op.Verb == verb && strings.Contains(op.Attachment, id) {
			out = append(out, op)
		}
	}
	return out
}

// cniVersion is the newest conflist version the containerd's libcni takes:
// 1.6 rejects a 1.1.0 result.
func (v containerdVersion) cniVersion() string {
	if v.legacy {
		return "1.0.0"
	}
	return "1.1.0"
}
