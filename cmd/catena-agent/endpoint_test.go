package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/catena-cni/catena/node/reconcile"
	"github.com/catena-cni/catena/node/reconcile/fakecri"
)

// lockedBuffer is a bytes.Buffer the agent writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunFindsRuntimeEndpoint: run's reconciler lists the runtime the
// endpoint flag names, its environment variable (the ConfigMap) when the
// flag is not given, or by default (auto) the one of the node's default
// sockets that kubelet uses: kubelet's endpoint, else the Node's
// containerRuntimeVersion, else the only socket that answers CRI; and logs
// which at start. With two answering and nothing to tell them apart (a
// CRI-O node with a containerd beside it) it refuses to guess: exit 2,
// naming the sockets and the flag, nothing listed. With none, it lists the
// first and warns. Each runtime is a fake CRI server counting its
// ListPodSandbox calls.
func TestRunFindsRuntimeEndpoint(t *testing.T) {
	dir := t.TempDir()
	containerd, crio := filepath.Join(dir, "containerd.sock"), filepath.Join(dir, "crio.sock")
	missing := "unix://" + filepath.Join(dir, "missing.sock")
	start := func(t *testing.T, path, name, version string) *fakecri.Server {
		srv, err := fakecri.Start(path)
		require.NoError(t, err)
		t.Cleanup(srv.Stop)
		srv.SetRuntime(name, version)
		return srv
	}
	noKubelet := func() (reconcile.Kubelet, error) { return reconcile.Kubelet{}, errors.New("no kubelet process found") }
	kubeletAt := func(e string) func() (reconcile.Kubelet, error) {
		return func() (reconcile.Kubelet, error) { return reconcile.Kubelet{Endpoint: e, Root: "/nonexistent"}, nil }
	}
	nodeSays := func(v string) func(context.Context, *rest.Config, string) (string, error) {
		return func(_ context.Context, _ *rest.Config, node string) (string, error) {
			if node != "node1" {
				return "", fmt.Errorf("node %q", node)
			}
			if v == "" {
				return "", errors.New("nodes \"node1\" is forbidden")
			}
			return v, nil
		}
	}
	both := []string{"unix://" + containerd, "unix://" + crio}
	cases := []struct {
		name        string
		sockets     []string // the defaults auto tries, in order
		kubelet     func() (reconcile.Kubelet, error)
		nodeRuntime func(context.Context, *rest.Config, string) (string, error)
		flag        string // --runtime-endpoint, if set
		envVar      string // CATENA_AGENT_RUNTIME_ENDPOINT, if set
		want        string // the endpoint listed; "": neither fake
		wantLog     string
		wantCode    int
	}{
		{name: "auto: both answer, the Node runs CRI-O", sockets: both, kubelet: noKubelet, nodeRuntime: nodeSays("cri-o://1.34.11"),
			want: crio, wantLog: `msg="runtime endpoint" endpoint=unix://` + crio + ` from="auto: the Node's runtime, cri-o://1.34.11" unknown="kubelet's endpoint: no kubelet process found"`},
		{name: "auto: both answer, kubelet's endpoint is containerd's", sockets: both, kubelet: kubeletAt("unix://" + containerd), nodeRuntime: nodeSays(""),
			want: containerd, wantLog: `msg="runtime endpoint" endpoint=unix://` + containerd + ` from="auto: kubelet's runtime endpoint, unix://` + containerd + `"`},
		{name: "auto: both answer, nothing tells which: refused", sockets: both, kubelet: noKubelet, nodeRuntime: nodeSays(""), wantCode: 2,
			wantLog: "--runtime-endpoint auto: more than one runtime socket answers, and neither kubelet's endpoint nor the Node's runtime is known; " +
				"sockets found: unix://" + containerd + " (containerd://2.4.0), unix://" + crio + " (cri-o://1.34.11): refusing to guess, set --runtime-endpoint"},
		{name: "auto: both answer, nothing asked: refused", sockets: both, wantCode: 2,
			wantLog: "refusing to guess, set --runtime-endpoint to the socket kubelet uses (unknown: kubelet's endpoint: not looked for; the Node's runtime: not asked)"},
		{name: "auto: CRI-O's alone when containerd's is missing", sockets: []string{missing, "unix://" + crio}, kubelet: noKubelet,
			want: crio, wantLog: `msg="runtime endpoint" endpoint=unix://` + crio + ` from="auto: the only runtime socket that answers" passed="` + missing + `: stat `},
		{name: "auto: none exists", sockets: []string{missing, missing + "2"},
			wantLog: `level=WARN msg="runtime endpoint: no runtime socket found; listing the first until restarted (set --runtime-endpoint)" endpoint=` + missing},
		{name: "the flag wins over auto", sockets: both, flag: "unix://" + crio,
			want: crio, wantLog: `msg="runtime endpoint" endpoint=unix://` + crio + ` from=--runtime-endpoint`},
		{name: "the environment wins over auto", sockets: both, envVar: crio,
			want: crio, wantLog: `msg="runtime endpoint" endpoint=` + crio + ` from=--runtime-endpoint`},
		{name: "the flag wins over the environment", sockets: []string{missing}, flag: containerd, envVar: crio,
			want: containerd, wantLog: `msg="runtime endpoint" endpoint=` + containerd + ` from=--runtime-endpoint`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fakes := map[string]*fakecri.Server{containerd: start(t, containerd, "containerd", "v2.4.0"), crio: start(t, crio, "cri-o", "1.34.11")}
			n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
			args := append([]string{"run", "--listen-addr", freeAddr(t), "--reconcile-interval", "50ms", "--events=false", "--node-name", "node1"}, n.installArgs()...)
			if tc.flag != "" {
				args = append(args, "--runtime-endpoint", tc.flag)
			}
			getenv := func(k string) string {
				if k == "CATENA_AGENT_RUNTIME_ENDPOINT" {
					return tc.envVar
				}
				return ""
			}
			var stderr lockedBuffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			go func() {
				done <- runContext(ctx, args, env{stdout: &bytes.Buffer{}, stderr: &stderr, fs: afero.NewOsFs(), getenv: getenv, runtimeSockets: tc.sockets,
					kubelet: tc.kubelet, nodeRuntime: tc.nodeRuntime})
			}()
			if tc.wantCode != 0 {
				select {
				case code := <-done:
					assert.Equal(t, tc.wantCode, code, stderr.String())
				case <-time.After(10 * time.Second):
					cancel()
					t.Fatalf("run did not refuse: %s", stderr.String())
				}
				cancel()
				assert.Contains(t, stderr.String(), tc.wantLog)
				for path, srv := range fakes {
					assert.Zero(t, srv.Calls(), "%s is not listed", filepath.Base(path))
				}
				return
			}
			t.Cleanup(func() {
				cancel()
				assert.Zero(t, <-done, stderr.String())
			})
			if tc.want != "" {
				require.Eventually(t, func() bool { return fakes[tc.want].Calls() >= 2 }, 5*time.Second, 20*time.Millisecond, stderr.String())
			} else {
				require.Eventually(t, func() bool { return strings.Count(stderr.String(), "nothing reclaimed in this pass") >= 2 },
					5*time.Second, 20*time.Millisecond, stderr.String())
			}
			for path, srv := range fakes {
				if path != tc.want {
					assert.Zero(t, srv.Calls(), "%s is not listed", filepath.Base(path))
				}
			}
			assert.Contains(t, stderr.String(), tc.wantLog)
			assert.Equal(t, 1, strings.Count(stderr.String(), `msg="runtime endpoint`), "logged once, at start")
		})
	}
}
