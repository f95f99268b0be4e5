package deploy

import (
	"bytes"
	_ "embed"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// CatenaYAML is deploy/catena.yaml.
//
//go:embed catena.yaml
var CatenaYAML []byte

// UninstallYAML is deploy/uninstall.yaml.
//
//go:embed uninstall.yaml
var UninstallYAML []byte

// Decode splits a multi-document manifest and decodes each document into
// its typed object (*corev1.Namespace, *corev1.ServiceAccount,
// *corev1.ConfigMap, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding,
// *rbacv1.Role, *rbacv1.RoleBinding, *appsv1.DaemonSet), refusing unknown and duplicate
// fields and unknown kinds.
func Decode(manifest []byte) ([]any, error) {
	var objs []any
	for n, doc := range bytes.Split(manifest, []byte("\n---\n")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		obj, err := newObject(tm)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", n, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

func newObject(tm metav1.TypeMeta) (any, error) {
	switch tm.GroupVersionKind().String() {
	case "/v1, Kind=Namespace":
		return &corev1.Namespace{}, nil
	case "/v1, Kind=ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "/v1, Kind=ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "rbac.authorization.k8s.io/v1, Kind=ClusterRole":
		return &rbacv1.ClusterRole{}, nil
	case "rbac.authorization.k8s.io/v1, Kind=ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}, nil
	case "rbac.authorization.k8s.io/v1, Kind=Role":
		return &rbacv1.Role{}, nil
	case "rbac.authorization.k8s.io/v1, Kind=RoleBinding":
		return &rbacv1.RoleBinding{}, nil
	case "apps/v1, Kind=DaemonSet":
		return &appsv1.DaemonSet{}, nil
	}
	return nil, fmt.Errorf("unexpected kind %s %s", tm.APIVersion, tm.Kind)
}

// stripComments drops comment lines, to tell an empty document.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
