package integration

import (
	"fmt"
	"os"
	"strings"
	"time"

	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podConfig is a sandbox with pod network and unique metadata, in the
// test's cgroup parent, with hostPort mapped to port 80 when not 0.
func (c *crioDaemon) podConfig(name string, hostPort int32) *cri.PodSandboxConfig {
	uid := fmt.Sprintf("%s-%d-%d", name, os.Getpid(), seq.Add(1))
	cfg := &cri.PodSandboxConfig{
		Metadata:     &cri.PodSandboxMetadata{Name: name, Uid: uid, Namespace: "catena-it"},
		Hostname:     name,
		LogDirectory: c.dir + "/pods/" + uid,
		Linux: &cri.LinuxPodSandboxConfig{
			CgroupParent: c.cgroupParent,
			SecurityContext: &cri.LinuxSandboxSecurityContext{
				NamespaceOptions: &cri.NamespaceOption{Network: cri.NamespaceMode_POD},
			},
		},
	}
	if hostPort != 0 {
		cfg.PortMappings = []*cri.PortMapping{{Protocol: cri.Protocol_TCP, ContainerPort: 80, HostPort: hostPort}}
	}
	return cfg
}

// runPod runs a sandbox and returns its ID (the CNI container ID).
func (c *crioDaemon) runPod(cfg *cri.PodSandboxConfig) (string, error) {
	resp, err := c.rt.RunPodSandbox(bg, &cri.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", err
	}
	return resp.PodSandboxId, nil
}

// mustRunPod runs a sandbox that must start.
func (c *crioDaemon) mustRunPod(name string, hostPort int32) string {
	c.t.Helper()
	id, err := c.runPod(c.podConfig(name, hostPort))
	if err != nil {
		c.t.Fatalf("RunPodSandbox %s: %v\n%s", name, err, c.logTail())
	}
	return id
}

// podStatus is the sandbox's state, IP and network namespace path as the
// CRI reports them.
func (c *crioDaemon) podStatus(id string) (cri.PodSandboxState, string, string, error) {
	st, err := c.rt.PodSandboxStatus(bg, &cri.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return 0, "", "", err
	}
	netns := ""
	if info := st.GetInfo()["info"]; info != "" {
		// CRI-O's verbose info: {"...","runtimeSpec":{..."namespaces":[{"type":"network","path":"..."}]}}
		if i := strings.Index(info, `"type":"network","path":"`); i >= 0 {
			rest := info[i+len(`"type":"network","path":"`):]
			netns = rest[:strings.IndexByte(rest, '"')]
		}
	}
	return st.GetStatus().GetState(), st.GetStatus().GetNetwork().GetIp(), netns, nil
}

func (c *crioDaemon) stopPod(id string) error {
	_, err := c.rt.StopPodSandbox(bg, &cri.StopPodSandboxRequest{PodSandboxId: id})
	return err
}

func (c *crioDaemon) removePod(id string) error {
	_, err := c.rt.RemovePodSandbox(bg, &cri.RemovePodSandboxRequest{PodSandboxId: id})
	return err
}

// pods lists the IDs of the sandboxes CRI-O knows.
func (c *crioDaemon) pods() []string {
	c.t.Helper()
	list, err := c.rt.ListPodSandbox(bg, &cri.ListPodSandboxRequest{})
	if err != nil {
		c.t.Fatalf("ListPodSandbox: %v", err)
	}
	var ids []string
	for _, sb := range list.GetItems() {
		ids = append(ids, sb.Id)
	}
	return ids
}

// networkReady is the CRI Status call's NetworkReady condition.
func (c *crioDaemon) networkReady() (bool, string) {
	c.t.Helper()
	st, err := c.rt.Status(bg, &cri.StatusRequest{})
	if err != nil {
		c.t.Fatalf("CRI Status: %v", err)
	}
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.Type == cri.NetworkReady {
			return cond.Status, strings.TrimSpace(cond.Reason + ": " + cond.Message)
		}
	}
	c.t.Fatalf("CRI Status has no %s condition: %v", cri.NetworkReady, st)
	return false, ""
}

// waitNetworkReady waits until CRI-O reports its network ready: its CNI
// layer polls STATUS of the default network every 500 ms until it
// succeeds, then runs its one GC of the start.
func (c *crioDaemon) waitNetworkReady() {
	c.t.Helper()
	c.eventually("CRI-O's network is ready", time.Minute, func() error {
		if ok, msg := c.networkReady(); !ok {
			return fmt.Errorf("not ready: %s", msg)
		}
		return nil
	})
}
