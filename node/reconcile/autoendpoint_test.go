package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/reconcile/fakecri"
)

// TestChooseEndpoint: auto takes the runtime kubelet uses: kubelet's own
// endpoint, else the socket whose runtime the Node names; with neither
// known, the one socket that answers (or, none answering, the one that
// exists). Whenever it cannot tell (two answer, the Node's runtime is in
// none or two of them, kubelet's endpoint runs another runtime than the
// Node says) it refuses, naming the sockets and the flag.
func TestChooseEndpoint(t *testing.T) {
	const ctrd, crio = "unix:///run/containerd/containerd.sock", "unix:///var/run/crio/crio.sock"
	candidates := []string{ctrd, crio}
	containerd := RuntimeSocket{Endpoint: ctrd, Runtime: "containerd://2.4.0"}
	crioUp := RuntimeSocket{Endpoint: crio, Runtime: "cri-o://1.34.11"}
	crioDown := RuntimeSocket{Endpoint: crio, Err: "connection refused"}
	both := []RuntimeSocket{containerd, crioUp}
	for _, tc := range []struct {
		name  string
		facts EndpointFacts
		want  EndpointChoice
		// refused: parts of the error ("": no error)
		refused []string
	}{
		{name: "a CRI-O node with a containerd for builds: the Node says CRI-O",
			facts: EndpointFacts{Sockets: both, NodeRuntime: "cri-o://1.34.11"},
			want:  EndpointChoice{Endpoint: crio, Found: true, From: "auto: the Node's runtime, cri-o://1.34.11"}},
		{name: "the Node says containerd",
			facts: EndpointFacts{Sockets: both, NodeRuntime: "containerd://2.4.0"},
			want:  EndpointChoice{Endpoint: ctrd, Found: true, From: "auto: the Node's runtime, containerd://2.4.0"}},
		{name: "kubelet's endpoint, here at another path",
			facts: EndpointFacts{Sockets: []RuntimeSocket{containerd, kubelets(crioUp)}, KubeletEndpoint: "unix:///srv/crio/crio.sock"},
			want:  EndpointChoice{Endpoint: crio, Found: true, From: "auto: kubelet's runtime endpoint, unix:///srv/crio/crio.sock"}},
		{name: "kubelet's endpoint wins over the one socket that answers",
			facts: EndpointFacts{Sockets: []RuntimeSocket{containerd, kubelets(crioDown)}, KubeletEndpoint: crio},
			want:  EndpointChoice{Endpoint: crio, Found: true, From: "auto: kubelet's runtime endpoint, " + crio}},
		{name: "kubelet's endpoint and the Node agree",
			facts: EndpointFacts{Sockets: []RuntimeSocket{containerd, kubelets(crioUp)}, KubeletEndpoint: crio, NodeRuntime: "cri-o://1.34.11"},
			want:  EndpointChoice{Endpoint: crio, Found: true, From: "auto: kubelet's runtime endpoint, " + crio}},
		{name: "kubelet's endpoint runs another runtime than the Node says",
			facts:   EndpointFacts{Sockets: []RuntimeSocket{kubelets(containerd), crioUp}, KubeletEndpoint: ctrd, NodeRuntime: "cri-o://1.34.11"},
			refused: []string{"kubelet's endpoint " + ctrd + " runs containerd://2.4.0, but the Node's runtime is cri-o://1.34.11"}},
		{name: "kubelet's endpoint is none of the sockets here",
			facts:   EndpointFacts{Sockets: []RuntimeSocket{containerd}, KubeletEndpoint: "unix:///srv/crio.sock"},
			refused: []string{"kubelet's runtime endpoint unix:///srv/crio.sock is 0 of the sockets found here", ctrd + " (containerd://2.4.0)"}},
		{name: "the Node's runtime answers on no socket",
			facts:   EndpointFacts{Sockets: []RuntimeSocket{containerd, crioDown}, NodeRuntime: "cri-o://1.34.11"},
			refused: []string{"the Node's runtime is cri-o://1.34.11, and 0 of the sockets that answer run it", crio + " (no answer: connection refused)"}},
		{name: "two answer, nothing says which kubelet uses",
			facts: EndpointFacts{Sockets: both},
			refused: []string{"more than one runtime socket answers", ctrd + " (containerd://2.4.0), " + crio + " (cri-o://1.34.11)",
				"refusing to guess, set --runtime-endpoint"}},
		{name: "one answers: taken",
			facts: EndpointFacts{Sockets: []RuntimeSocket{containerd, crioDown}},
			want:  EndpointChoice{Endpoint: ctrd, Found: true, From: "auto: the only runtime socket that answers"}},
		{name: "only CRI-O's socket exists",
			facts: EndpointFacts{Sockets: []RuntimeSocket{crioUp}, Passed: []string{ctrd + ": stat: no such file or directory"}},
			want: EndpointChoice{Endpoint: crio, Found: true, From: "auto: the only runtime socket that answers",
				Passed: []string{ctrd + ": stat: no such file or directory"}}},
		{name: "one socket, not answering yet",
			facts: EndpointFacts{Sockets: []RuntimeSocket{crioDown}},
			want:  EndpointChoice{Endpoint: crio, Found: true, From: "auto: the only runtime socket, which does not answer yet"}},
		{name: "two sockets, neither answers",
			facts:   EndpointFacts{Sockets: []RuntimeSocket{{Endpoint: ctrd, Err: "refused"}, crioDown}},
			refused: []string{"more than one runtime socket exists, none answers"}},
		{name: "no socket: the first, not found",
			facts: EndpointFacts{Passed: []string{"a", "b"}},
			want:  EndpointChoice{Endpoint: ctrd, Passed: []string{"a", "b"}}},
		{name: "the Node's runtime known, no socket at all",
			facts:   EndpointFacts{NodeRuntime: "cri-o://1.34.11"},
			refused: []string{"0 of the sockets that answer run it", "sockets found: none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseEndpoint(candidates, tc.facts)
			if len(tc.refused) > 0 {
				require.Error(t, err)
				for _, r := range tc.refused {
					assert.Contains(t, err.Error(), r)
				}
				assert.Contains(t, err.Error(), "set --runtime-endpoint")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// kubelets is s marked as kubelet's socket.
func kubelets(s RuntimeSocket) RuntimeSocket {
	s.Kubelet = true
	return s
}

// TestProbeEndpoints: each candidate that is a socket is asked its CRI
// Version; one that refuses it (no CRI served there) is a socket that does
// not answer; one that is not a socket is passed over with its reason.
func TestProbeEndpoints(t *testing.T) {
	dir := t.TempDir()
	ctrd, crio, plain := filepath.Join(dir, "containerd.sock"), filepath.Join(dir, "crio.sock"), filepath.Join(dir, "plain.sock")
	for _, p := range []struct {
		path, name, version string
	}{{ctrd, "", ""}, {crio, "cri-o", "1.34.11"}} {
		srv, err := fakecri.Start(p.path)
		require.NoError(t, err)
		t.Cleanup(srv.Stop)
		srv.SetRuntime(p.name, p.version)
	}
	listenUnix(t, plain)
	missing := filepath.Join(dir, "missing.sock")
	f := ProbeEndpoints(context.Background(), []string{"unix://" + ctrd, crio, missing, plain})
	require.Len(t, f.Sockets, 3)
	assert.Equal(t, "unix://"+ctrd, f.Sockets[0].Endpoint)
	assert.Empty(t, f.Sockets[0].Runtime)
	assert.Contains(t, f.Sockets[0].Err, "no runtime service here")
	assert.Equal(t, RuntimeSocket{Endpoint: crio, Runtime: "cri-o://1.34.11"}, f.Sockets[1])
	assert.Equal(t, plain, f.Sockets[2].Endpoint)
	assert.NotEmpty(t, f.Sockets[2].Err, "a socket that speaks no gRPC does not answer")
	assert.Equal(t, []string{missing + ": stat " + missing + ": no such file or directory"}, f.Passed)
}

// fakeProc makes a procfs under dir with one process per entry of
// cmdlines (pid 100, 101, ...), each named by comm, and returns dir.
func fakeProc(t *testing.T, comm string, cmdlines ...[]string) string {
	t.Helper()
	dir := t.TempDir()
	for i, args := range cmdlines {
		p := filepath.Join(dir, strconv.Itoa(100+i))
		require.NoError(t, os.MkdirAll(filepath.Join(p, "root"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(p, "comm"), []byte(comm+"\n"), 0o644))
		var raw []byte
		for _, a := range args {
			raw = append(append(raw, a...), 0)
		}
		require.NoError(t, os.WriteFile(filepath.Join(p, "cmdline"), raw, 0o644))
	}
	return dir
}

// TestFindKubelet: kubelet's --container-runtime-endpoint (either form),
// else containerRuntimeEndpoint in its --config file read through its
// root; the flag wins. No kubelet, kubelets that disagree, a config that
// cannot be read or says nothing: an error, never kubelet's default.
func TestFindKubelet(t *testing.T) {
	const crio = "unix:///var/run/crio/crio.sock"
	withConfig := func(t *testing.T, proc, config string) string {
		t.Helper()
		path := filepath.Join(proc, "100", "root", "var", "lib", "kubelet", "config.yaml")
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(config), 0o644))
		return proc
	}
	for _, tc := range []struct {
		name    string
		proc    func(t *testing.T) string
		want    string
		wantErr string
	}{
		{name: "the flag", proc: func(t *testing.T) string {
			return fakeProc(t, "kubelet", []string{"/usr/bin/kubelet", "--v=2", "--container-runtime-endpoint=" + crio})
		}, want: crio},
		{name: "the flag, its value apart", proc: func(t *testing.T) string {
			return fakeProc(t, "kubelet", []string{"kubelet", "--container-runtime-endpoint", crio})
		}, want: crio},
		{name: "the config file", proc: func(t *testing.T) string {
			return withConfig(t, fakeProc(t, "kubelet", []string{"kubelet", "--config", "/var/lib/kubelet/config.yaml"}),
				"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: "+crio+"\n")
		}, want: crio},
		{name: "the flag wins over the config file", proc: func(t *testing.T) string {
			return withConfig(t, fakeProc(t, "kubelet", []string{"kubelet", "--config=/var/lib/kubelet/config.yaml", "--container-runtime-endpoint=/run/x.sock"}),
				"containerRuntimeEndpoint: "+crio+"\n")
		}, want: "/run/x.sock"},
		{name: "two kubelets, one endpoint", proc: func(t *testing.T) string {
			return fakeProc(t, "kubelet", []string{"kubelet", "--container-runtime-endpoint=" + crio},
				[]string{"kubelet", "--container-runtime-endpoint=unix:///run/crio/crio.sock"})
		}, want: crio},
		{name: "two kubelets that disagree", proc: func(t *testing.T) string {
			return fakeProc(t, "kubelet", []string{"kubelet", "--container-runtime-endpoint=" + crio},
				[]string{"kubelet", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock"})
		}, wantErr: "kubelets with different runtime endpoints"},
		{name: "no kubelet", proc: func(t *testing.T) string {
			return fakeProc(t, "containerd", []string{"containerd", "--container-runtime-endpoint=" + crio})
		}, wantErr: "no kubelet process found"},
		{name: "neither flag", proc: func(t *testing.T) string {
			return fakeProc(t, "kubelet", []string{"kubelet", "--v=2"})
		}, wantErr: "neither --container-runtime-endpoint nor --config"},
		{name: "a config file that cannot be read", proc: func(t *testing.T) string {
			return fakeProc(t, "kubelet", []string{"kubelet", "--config=/etc/kubelet.yaml"})
		}, wantErr: "its --config /etc/kubelet.yaml: open"},
		{name: "a config file without the endpoint", proc: func(t *testing.T) string {
			return withConfig(t, fakeProc(t, "kubelet", []string{"kubelet", "--config=/var/lib/kubelet/config.yaml"}), "kind: KubeletConfiguration\n")
		}, wantErr: "sets no containerRuntimeEndpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := tc.proc(t)
			got, err := FindKubelet(proc)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Empty(t, got.Endpoint)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Kubelet{Endpoint: tc.want, Root: filepath.Join(proc, "100", "root")}, got)
		})
	}
}

// TestKubeletMark: the socket kubelet's endpoint names is marked, by its
// path (/var/run read as /run), or, mounted at another path here, as the
// same socket through kubelet's root; a kubelet socket that cannot be
// seen, at no path of ours, leaves the facts as they were.
func TestKubeletMark(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "srv"), 0o755))
	theirs := filepath.Join(root, "srv", "crio.sock")
	listenUnix(t, theirs)
	ours := filepath.Join(dir, "crio.sock")
	require.NoError(t, os.Link(theirs, ours), "the same socket at another path, as a bind mount shows it")
	other := filepath.Join(dir, "containerd.sock")
	listenUnix(t, other)
	facts := func() EndpointFacts {
		return EndpointFacts{Sockets: []RuntimeSocket{{Endpoint: "unix://" + other}, {Endpoint: ours}}}
	}

	f := facts()
	require.NoError(t, Kubelet{Endpoint: "unix:///srv/crio.sock", Root: root}.Mark(&f))
	assert.Equal(t, "unix:///srv/crio.sock", f.KubeletEndpoint)
	assert.False(t, f.Sockets[0].Kubelet)
	assert.True(t, f.Sockets[1].Kubelet, "the same socket through kubelet's root")

	f = facts()
	require.NoError(t, Kubelet{Endpoint: strings.Replace("unix://"+other, "/tmp/", "/tmp/./", 1), Root: filepath.Join(dir, "nowhere")}.Mark(&f))
	assert.True(t, f.Sockets[0].Kubelet, "the same path")
	assert.False(t, f.Sockets[1].Kubelet)

	f = facts()
	err := Kubelet{Endpoint: "unix:///srv/gone.sock", Root: root}.Mark(&f)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubelet's runtime endpoint unix:///srv/gone.sock")
	assert.Equal(t, facts(), f, "unchanged")
}
