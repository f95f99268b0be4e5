package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/stretchr/testify/require"
)

// containerdVersion is one containerd the CRI tests drive: its binaries and
// how to write its config.
type containerdVersion struct {
	name   string // "2.4" or "1.6", used in test names
	bin    string // containerd
	ctr    string // ctr of the same version
	legacy bool   // 1.6: version 2 config, shim sockets under /run/containerd/s
	// metrics is the address of its Prometheus endpoint (/v1/metrics),
	// host:port; none when empty
	metrics string
}

// containerd24 is the primary target, built by scripts/install-containerd.sh
// into bin/containerd2; containerd16 is Debian's package.
func containerd24() containerdVersion {
	dir := filepath.Join(repoRoot(), "bin", "containerd2")
	return containerdVersion{name: "2.4", bin: filepath.Join(dir, "containerd"), ctr: filepath.Join(dir, "ctr")}
}

func containerd16() containerdVersion {
	return containerdVersion{name: "1.6", bin: "/usr/bin/containerd", ctr: "/usr/bin/ctr", legacy: true}
}

// requireBinaries fails (never skips) when the version's binaries are
// missing: they are installed by `make plugins`.
func (v containerdVersion) requireBinaries(t *testing.T) {
	t.Helper()
	for _, b := range []string{v.bin, v.ctr, v.shim(), "runc"} {
		_, err := exec.LookPath(b)
		require.NoError(t, err, "containerd %s: %s missing (run `make plugins`, which runs scripts/install-containerd.sh)", v.name, b)
	}
}

// shim is the runc shim the version uses: 2.4 runs the one built beside it
// (runtime_path); 1.6 finds Debian's on PATH.
func (v containerdVersion) shim() string {
	if v.legacy {
		return "containerd-shim-runc-v2"
	}
	return filepath.Join(filepath.Dir(v.bin), "containerd-shim-runc-v2")
}

// configTemplate is containerd's config for both versions; the CRI plugin
// differs only in where its tables live and in a few per-version lines.
var configTemplate = template.Must(template.New("config").Parse(`version = {{.Version}}
root = "{{.Dir}}/root"
state = "{{.Dir}}/state"
[grpc]
  address = "{{.Dir}}/c.sock"
[ttrpc]
  address = "{{.Dir}}/c.sock.ttrpc"
{{if .Metrics}}[metrics]
  address = "{{.Metrics}}"
{{end -}}
[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/opt"
{{.Extra}}
[{{.CRI}}]
  {{.CRILine}}
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
[{{.CRI}}.containerd]
  {{.ContainerdLine}}
  default_runtime_name = "runc"
[{{.CRI}}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  {{.RuncLine}}
[{{.CRI}}.containerd.runtimes.runc.options]
  Root = "{{.Dir}}/runc"
  SystemdCgroup = false
[{{.CRI}}.cni]
  {{.BinDirs}}
  conf_dir = "{{.ConfDir}}"
  max_conf_num = 1
`))

// config renders the daemon's config: everything private under dir (root,
// state, sockets, runc root, /opt, and 2.x's shim sockets), CNI from cniBin
// and confDir, the local pause image as the sandbox image, the metrics
// endpoint if v has one. 2.4 takes a version 3 config; 1.6 a version 2
// one.
func (v containerdVersion) config(dir, cniBin, confDir string) string {
	p := map[string]any{"Version": 3, "Dir": dir, "ConfDir": confDir, "CRILine": "", "ContainerdLine": "", "Metrics": v.metrics,
		"CRI":      `plugins."io.containerd.cri.v1.runtime"`,
		"BinDirs":  fmt.Sprintf("bin_dirs = [%q]", cniBin),
		"RuncLine": fmt.Sprintf("runtime_path = %q", v.shim()),
		"Extra": fmt.Sprintf(`[plugins."io.containerd.shim.v1.manager"]
  socket_dir = "%s/s"
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = %q`, dir, pauseImage)}
	if v.legacy {
		p["Version"], p["Extra"], p["RuncLine"] = 2, "", ""
		p["CRI"] = `plugins."io.containerd.grpc.v1.cri"`
		p["CRILine"] = fmt.Sprintf("sandbox_image = %q", pauseImage)
		p["ContainerdLine"] = `snapshotter = "overlayfs"`
		p["BinDirs"] = fmt.Sprintf("bin_dir = %q", cniBin)
	}
	var b strings.Builder
	if err := configTemplate.Execute(&b, p); err != nil {
		panic(err) // the template and its data are fixed
	}
	return b.String()
}

// writeAtomic replaces path by a temp file renamed over it: containerd
// watches conf_dir and must never load a half-written conflist.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Rename(f.Name(), path))
}
