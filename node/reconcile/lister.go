package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxLister lists the IDs of every pod sandbox the runtime knows, in
// any state (READY or NOTREADY): kubelet still stops and removes a
// NOTREADY sandbox, and the runtime then sends DEL.
type SandboxLister interface {
	SandboxIDs(ctx context.Context) (map[string]struct{}, error)
}

// CRILister is the SandboxLister of a CRI runtime (containerd, CRI-O) over
// k8s.io/cri-api gRPC.
type CRILister struct {
	conn   *grpc.ClientConn
	client cri.RuntimeServiceClient
}

var _ SandboxLister = (*CRILister)(nil)

// maxListSize bounds a ListPodSandbox answer (gRPC's default is 4 MiB; a
// node with thousands of sandboxes and their labels can exceed it).
const maxListSize = 64 << 20

// DialCRI returns a lister of the runtime at endpoint: a socket path or a
// unix:// URL. It does not connect until the first call.
func DialCRI(endpoint string) (*CRILister, error) {
	target := endpoint
	if strings.HasPrefix(target, "/") {
		target = "unix://" + target
	}
	if !strings.HasPrefix(target, "unix://") {
		return nil, fmt.Errorf("runtime endpoint %q: only unix sockets are supported (a path or unix:///path)", endpoint)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxListSize)))
	if err != nil {
		return nil, fmt.Errorf("runtime endpoint %q: %w", endpoint, err)
	}
	return &CRILister{conn: conn, client: cri.NewRuntimeServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *CRILister) Close() error { return c.conn.Close() }

// SandboxIDs implements SandboxLister with one ListPodSandbox call without
// a filter: every sandbox, whatever its state.
func (c *CRILister) SandboxIDs(ctx context.Context) (map[string]struct{}, error) {
	resp, err := c.client.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	ids := make(map[string]struct{}, len(resp.Items))
	for _, s := range resp.Items {
		ids[s.Id] = struct{}{}
	}
	return ids, nil
}

// Runtime is the runtime's CRI Version answer as kubelet shows it in the
// Node's status.nodeInfo.containerRuntimeVersion: "<name>://<version>".
func (c *CRILister) Runtime(ctx context.Context) (string, error) {
	v, err := c.client.Version(ctx, &cri.VersionRequest{})
	if err != nil {
		return "", fmt.Errorf("Version: %w", err)
	}
	if v.RuntimeName == "" {
		return "", fmt.Errorf("Version: no runtime name")
	}
	return v.RuntimeName + "://" + strings.TrimPrefix(v.RuntimeVersion, "v"), nil
}

// listWithin calls l bounded by timeout: a slow runtime is an error.
func listWithin(ctx context.Context, l SandboxLister, timeout time.Duration) (map[string]struct{}, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ids, err := l.SandboxIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return ids, nil
}
