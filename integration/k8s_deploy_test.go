package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/catena-cni/catena/deploy"
)

// hostPathMap remaps the manifest's host paths to the node's private dirs.
// The manifest mounts each host path at the same path in the container
// (the generated conflist names the cache dir as the host's catena sees
// it), so a host path is remapped wherever it appears: hostPath volumes,
// their mount paths, and the agent's flags.
func (n *k8sNode) hostPathMap(t *testing.T) map[string]string {
	t.Helper()
	if n.crio != nil {
		return n.crioHostPathMap(t)
	}
	return map[string]string{
		"/etc/cni/net.d":  n.ctd.confDir,
		"/opt/cni/bin":    n.cniBin,
		"/var/lib/cni":    n.cniState,
		"/run/containerd": n.ctd.dir,
		// no CRI-O here: an empty dir (DirectoryOrCreate makes it)
		"/var/run/crio":  filepath.Join(n.dir, "crio-run"),
		"/var/run/netns": n.netnsDir(),
	}
}

// remap is path with its longest host-path prefix in m replaced.
func remap(m map[string]string, path string) string {
	best := ""
	for from := range m {
		if (path == from || strings.HasPrefix(path, from+"/")) && len(from) > len(best) {
			best = from
		}
	}
	if best == "" {
		return path
	}
	return m[best] + strings.TrimPrefix(path, best)
}

// containerPaths are mount paths kept as they are: the agent finds the
// runtime's socket by default (--runtime-endpoint auto) at
// /run/containerd/containerd.sock or /var/run/crio/crio.sock in the
// container, whatever host dirs are mounted there; here CRI-O's is empty.
var containerPaths = []string{"/run/containerd", "/var/run/crio"}

// nodeManifest decodes an embedded manifest (deploy/catena.yaml or
// deploy/uninstall.yaml) and edits its DaemonSet for this node: host paths
// remapped (volumes, mounts, flags of the form --flag=/path), the image
// tag set, and the pods pinned to this node (the cluster has a second node
// while the CRI-O scenarios run, on the same host: one agent per host).
// On the CRI-O node, the agent is also pointed at CRI-O's socket
// (crioAgent). It fails if a hostPath is left unmapped.
func (n *k8sNode) nodeManifest(t *testing.T, manifest []byte, tag string) []any {
	t.Helper()
	objs, err := deploy.Decode(manifest)
	require.NoError(t, err)
	m := n.hostPathMap(t)
	for _, o := range objs {
		ds, ok := o.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		spec := &ds.Spec.Template.Spec
		spec.NodeSelector = map[string]string{"kubernetes.io/hostname": n.name}
		for i := range spec.Volumes {
			if hp := spec.Volumes[i].HostPath; hp != nil {
				mapped := remap(m, hp.Path)
				require.NotEqual(t, hp.Path, mapped, "hostPath %s of volume %s has no private dir", hp.Path, spec.Volumes[i].Name)
				hp.Path = mapped
			}
		}
		for i := range spec.Containers {
			c := &spec.Containers[i]
			for j := range c.VolumeMounts {
				if !slices.Contains(containerPaths, c.VolumeMounts[j].MountPath) {
					c.VolumeMounts[j].MountPath = remap(m, c.VolumeMounts[j].MountPath)
				}
			}
			for j, a := range c.Args {
				if flag, val, ok := strings.Cut(a, "="); ok {
					c.Args[j] = flag + "=" + remap(m, val)
				}
			}
			repo, _, ok := strings.Cut(c.Image, ":")
			require.True(t, ok, "image %s has a tag", c.Image)
			c.Image = repo + ":" + tag
		}
	}
	if n.crio != nil {
		n.crioAgent(t, objs)
	}
	return objs
}
