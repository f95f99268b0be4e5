package deploy

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/catena-cni/catena/libchain/release"
	"github.com/catena-cni/catena/node/reconcile"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// agentHelp returns `catena-agent <sub> --help` of the built binary, whose
// flags the manifests must use.
func agentHelp(t *testing.T, sub string) string {
	t.Helper()
	bin := os.Getenv("CATENA_BIN")
	if bin == "" {
		bin = "../bin"
	}
	path := filepath.Join(bin, "catena-agent")
	require.FileExists(t, path, "build it first: make build")
	out, err := exec.Command(path, sub, "--help").CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

// argFlags parses --name=value args.
func argFlags(t *testing.T, args []string) map[string]string {
	t.Helper()
	flags := map[string]string{}
	for _, a := range args {
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			val = "true"
		}
		require.True(t, strings.HasPrefix(a, "--"), "arg %q", a)
		flags[name] = val
	}
	return flags
}

func decodeAll(t *testing.T, manifest []byte) (map[string]any, *appsv1.DaemonSet) {
	t.Helper()
	objs, err := Decode(manifest)
	require.NoError(t, err)
	byKind := map[string]any{}
	var ds *appsv1.DaemonSet
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			byKind["Namespace"] = o
		case *corev1.ServiceAccount:
			byKind["ServiceAccount"] = o
		case *corev1.ConfigMap:
			byKind["ConfigMap"] = o
		case *rbacv1.ClusterRole:
			byKind["ClusterRole"] = o
		case *rbacv1.ClusterRoleBinding:
			byKind["ClusterRoleBinding"] = o
		case *rbacv1.Role:
			byKind["Role"] = o
		case *rbacv1.RoleBinding:
			byKind["RoleBinding"] = o
		case *appsv1.DaemonSet:
			require.Nil(t, ds, "one DaemonSet per manifest")
			ds = o
		}
	}
	require.NotNil(t, ds)
	return byKind, ds
}

// checkNodePod checks what both DaemonSets need on every node, and that
// every flag they pass exists in the agent's help and every path flag is a
// hostPath mounted at the same path.
func checkNodePod(t *testing.T, ds *appsv1.DaemonSet, sub string, pathFlags []string) (corev1.Container, map[string]string) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	assert.Equal(t, ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	assert.True(t, spec.HostNetwork)
	assert.Equal(t, "system-node-critical", spec.PriorityClassName)
	assert.Contains(t, spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists}, "tolerates every taint")
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, "localhost/catena:"+release.Version, c.Image, "the image make image tags by default")
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	assert.Equal(t, []string{"/catena-agent", sub}, c.Command)
	require.NotNil(t, c.SecurityContext)
	checkPrivileges(t, sub, c.SecurityContext)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		assert.False(t, req.IsZero(), "request %s", r)
		assert.False(t, lim.IsZero(), "limit %s", r)
		assert.LessOrEqual(t, req.Cmp(lim), 0, "request %s within its limit", r)
	}

	help := agentHelp(t, sub)
	flags := argFlags(t, c.Args)
	for name := range flags {
		assert.Contains(t, help, "--"+name+" ", "flag --%s of %s", name, sub)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
		v, ok := volumes[m.Name]
		require.True(t, ok, "volume %s", m.Name)
		if v.EmptyDir != nil {
			assert.Equal(t, "/tmp", m.MountPath, "the one emptyDir is the read-only root's scratch /tmp")
			continue
		}
		require.NotNil(t, v.HostPath, "volume %s is a hostPath", m.Name)
		assert.Equal(t, v.HostPath.Path, m.MountPath, "host path %s is mounted at the same path", m.Name)
	}
	for _, f := range pathFlags {
		p, ok := flags[f]
		require.True(t, ok, "--%s is passed", f)
		assert.True(t, mountedAt(mounts, p), "--%s=%s is under a hostPath mount", f, p)
	}
	return c, flags
}

// mountedAt: p is a mount path or under one.
func mountedAt(mounts map[string]corev1.VolumeMount, p string) bool {
	for dir := p; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		if _, ok := mounts[dir]; ok {
			return true
		}
	}
	return false
}

// TestCatenaManifest decodes deploy/catena.yaml strictly and checks the
// DaemonSet against the agent's flags: mounts, probes, options.
func TestCatenaManifest(t *testing.T) {
	byKind, ds := decodeAll(t, CatenaYAML)
	for _, k := range []string{"Namespace", "ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRoleBinding"} {
		require.Contains(t, byKind, k)
	}
	ns := byKind["Namespace"].(*corev1.Namespace).Name
	assert.Equal(t, ns, ds.Namespace)
	spec := ds.Spec.Template.Spec
	sa := byKind["ServiceAccount"].(*corev1.ServiceAccount)
	assert.Equal(t, sa.Name, spec.ServiceAccountName)
	assert.Equal(t, ns, sa.Namespace)
	assert.Equal(t, appsv1.RollingUpdateDaemonSetStrategyType, ds.Spec.UpdateStrategy.Type)

	// RBAC: exactly what the events, the secure /metrics and auto's Node
	// lookup need, bound to the agent's account.
	require.Contains(t, byKind, "ClusterRole")
	require.Contains(t, byKind, "ClusterRoleBinding")
	role := byKind["ClusterRole"].(*rbacv1.ClusterRole)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
	}, role.Rules, "events, the HTTPS /metrics' reviews and the Node's runtime: nothing more")
	binding := byKind["ClusterRoleBinding"].(*rbacv1.ClusterRoleBinding)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, binding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}, binding.Subjects)
	// Its own DaemonSet, and only it, for --uninstall-on-delete.
	nsRole := byKind["Role"].(*rbacv1.Role)
	assert.Equal(t, ns, nsRole.Namespace)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{ds.Name}, Verbs: []string{"get", "list", "watch"}},
	}, nsRole.Rules)
	nsBinding := byKind["RoleBinding"].(*rbacv1.RoleBinding)
	assert.Equal(t, ns, nsBinding.Namespace)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: nsRole.Name}, nsBinding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}, nsBinding.Subjects)
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.True(t, *spec.AutomountServiceAccountToken, "the agent's token, for events")

	c, flags := checkNodePod(t, ds, "run", []string{"cni-conf-dir", "cni-bin-dir", "cache-dir", "results-dir"})
	assert.True(t, spec.HostPID, "the reconciler sees which processes are in a pod's netns")
	byPath := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		byPath[m.MountPath] = m
	}
	require.Contains(t, byPath, "/var/run/netns")
	require.NotNil(t, byPath["/var/run/netns"].MountPropagation)
	assert.Equal(t, corev1.MountPropagationHostToContainer, *byPath["/var/run/netns"].MountPropagation)
	for _, sock := range reconcile.DefaultEndpoints() {
		assert.True(t, mountedAt(byPath, filepath.Dir(strings.TrimPrefix(sock, "unix://"))),
			"the dir of %s, a runtime socket --runtime-endpoint auto tries, is mounted", sock)
	}

	host, port, err := net.SplitHostPort(flags["listen-addr"])
	require.NoError(t, err)
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.ReadinessProbe, "/readyz"}, {c.LivenessProbe, "/healthz"}} {
		require.NotNil(t, p.probe)
		require.NotNil(t, p.probe.HTTPGet)
		assert.Equal(t, p.path, p.probe.HTTPGet.Path)
		assert.Equal(t, host, p.probe.HTTPGet.Host, "hostNetwork: the probe must reach --listen-addr's host")
		assert.Equal(t, port, strconv.Itoa(p.probe.HTTPGet.Port.IntValue()))
	}

	fromField := map[string]string{}
	for _, e := range c.Env {
		require.NotNil(t, e.ValueFrom, e.Name)
		switch ref := e.ValueFrom; {
		case ref.FieldRef != nil:
			fromField[e.Name] = ref.FieldRef.FieldPath
		case ref.ResourceFieldRef != nil:
			assert.Equal(t, c.Name, ref.ResourceFieldRef.ContainerName, e.Name)
			fromField[e.Name] = ref.ResourceFieldRef.Resource
		default:
			t.Errorf("%s: neither a field nor a resource", e.Name)
		}
	}
	assert.Equal(t, map[string]string{"CATENA_AGENT_NODE_NAME": "spec.nodeName", "CATENA_AGENT_NODE_IP": "status.hostIP",
		"CATENA_AGENT_MEMORY_LIMIT": "limits.memory"}, fromField)
	help := agentHelp(t, "run")
	for name := range fromField {
		assert.Contains(t, help, "--"+strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "CATENA_AGENT_"), "_", "-"))+" ")
	}

	cm := byKind["ConfigMap"].(*corev1.ConfigMap)
	assert.Equal(t, ns+"/"+ds.Name, cm.Data["CATENA_AGENT_UNINSTALL_ON_DELETE"], "the agent watches its own DaemonSet")
	require.Len(t, c.EnvFrom, 1)
	assert.Equal(t, cm.Name, c.EnvFrom[0].ConfigMapRef.Name)
	assert.Equal(t, ns, cm.Namespace)
	for key := range cm.Data {
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(key, "CATENA_AGENT_"), "_", "-"))
		assert.True(t, strings.HasPrefix(key, "CATENA_AGENT_"), key)
		assert.Contains(t, help, "--"+flag+" ", "ConfigMap key %s sets a flag of run", key)
		_, onCommandLine := flags[flag]
		assert.False(t, onCommandLine, "%s would be overridden by the args", key)
	}
}

// TestUninstallManifest decodes deploy/uninstall.yaml strictly: a DaemonSet
// running `catena-agent uninstall --wait` with the conf dir and cache dir
// mounted, which a static pod could run too.
func TestUninstallManifest(t *testing.T) {
	_, ds := decodeAll(t, UninstallYAML)
	c, flags := checkNodePod(t, ds, "uninstall", []string{"cni-conf-dir", "cache-dir"})
	assert.Equal(t, "true", flags["wait"])
	assert.Empty(t, c.EnvFrom)
	assert.Empty(t, ds.Spec.Template.Spec.ServiceAccountName)
}

// TestDecodeIsStrict: an unknown field, a duplicate field or an unknown
// kind fails the decode, so the manifest tests can fail.
func TestDecodeIsStrict(t *testing.T) {
	for _, tc := range []struct {
		name, doc, wantErr string
	}{
		{"unknown field", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\nspecc: {}\n", `unknown field "specc"`},
		{"misplaced field", strings.Replace(string(CatenaYAML), "      hostNetwork: true", "      hostNetwork: true\n      hostNetworking: true", 1), `unknown field "hostNetworking"`},
		{"duplicate field", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n  name: y\n", "already set"},
		{"unknown kind", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n", "unexpected kind v1 Secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
	objs, err := Decode(CatenaYAML)
	require.NoError(t, err)
	kinds := []string{}
	for _, o := range objs {
		kinds = append(kinds, strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1."))
	}
	// Helm's install order: what the DaemonSet's pods use exists first.
	assert.True(t, slices.Equal([]string{"Namespace", "ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "DaemonSet"}, kinds), "%v", kinds)
}

// agentCapabilities are the only capabilities the agent keeps, each for a
// reason docs/security.md gives.
var agentCapabilities = []corev1.Capability{"NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"}

// checkPrivileges checks the pods' least privilege: not privileged, every
// capability dropped but, for the agent (sub "run"), agentCapabilities; no
// privilege escalation, a read-only root filesystem, the runtime's default
// seccomp profile. The uninstall pod needs no capability.
func checkPrivileges(t *testing.T, sub string, sc *corev1.SecurityContext) {
	t.Helper()
	want := agentCapabilities
	if sub != "run" {
		want = nil
	}
	require.NotNil(t, sc.Privileged)
	assert.False(t, *sc.Privileged, "the agent is not privileged")
	require.NotNil(t, sc.AllowPrivilegeEscalation)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	require.NotNil(t, sc.ReadOnlyRootFilesystem)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	require.NotNil(t, sc.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.ElementsMatch(t, want, sc.Capabilities.Add)
}
