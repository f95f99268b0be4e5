package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
// flag is not given, or by default (auto) the first of the node's default
// sockets that exists (containerd's, then CRI-O's), and logs which at
// start; with none, it lists the first and warns. Each runtime is a fake
// CRI server counting its ListPodSandbox calls.
func TestRunFindsRuntimeEndpoint(t *testing.T) {
	dir := t.TempDir()
	containerd, crio := filepath.Join(dir, "containerd.sock"), filepath.Join(dir, "crio.sock")
	missing := "unix://" + filepath.Join(dir, "missing.sock")
	start := func(t *testing.T, path string) *fakecri.Server {
		srv, err := fakecri.Start(path)
		require.NoError(t, err)
		t.Cleanup(srv.Stop)
		return srv
	}
	cases := []struct {
		name    string
		sockets []string // the defaults auto tries, in order
		flag    string   // --runtime-endpoint, if set
		envVar  string   // CATENA_AGENT_RUNTIME_ENDPOINT, if set
		want    string   // the endpoint listed; "": neither fake
		wantLog string
	}{
		{name: "auto: containerd's socket first", sockets: []string{"unix://" + containerd, "unix://" + crio},
			want: containerd, wantLog: `msg="runtime endpoint" endpoint=unix://` + containerd + ` from="auto: the first runtime socket that exists"`},
		{name: "auto: CRI-O's when containerd's is missing", sockets: []string{missing, "unix://" + crio},
			want: crio, wantLog: `msg="runtime endpoint" endpoint=unix://` + crio + ` from="auto: the first runtime socket that exists" passed="` + missing + `: stat `},
		{name: "auto: none exists", sockets: []string{missing, missing + "2"},
			wantLog: `level=WARN msg="runtime endpoint: no runtime socket found; listing the first until restarted (set --runtime-endpoint)" endpoint=` + missing},
		{name: "the flag wins over auto", sockets: []string{"unix://" + containerd, "unix://" + crio}, flag: "unix://" + crio,
			want: crio, wantLog: `msg="runtime endpoint" endpoint=unix://` + crio + ` from=--runtime-endpoint`},
		{name: "the environment wins over auto", sockets: []string{"unix://" + containerd, "unix://" + crio}, envVar: crio,
			want: crio, wantLog: `msg="runtime endpoint" endpoint=` + crio + ` from=--runtime-endpoint`},
		{name: "the flag wins over the environment", sockets: []string{missing}, flag: containerd, envVar: crio,
			want: containerd, wantLog: `msg="runtime endpoint" endpoint=` + containerd + ` from=--runtime-endpoint`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fakes := map[string]*fakecri.Server{containerd: start(t, containerd), crio: start(t, crio)}
			n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
			args := append([]string{"run", "--listen-addr", freeAddr(t), "--reconcile-interval", "50ms", "--events=false"}, n.installArgs()...)
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
				done <- runContext(ctx, args, env{stdout: &bytes.Buffer{}, stderr: &stderr, fs: afero.NewOsFs(), getenv: getenv, runtimeSockets: tc.sockets})
			}()
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
