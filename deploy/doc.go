// Package deploy holds Catena's Helm chart (chart/catena), the one source
// of its Kubernetes manifests, and the manifests rendered from it with its
// defaults (catena.yaml, uninstall.yaml: make manifests, checked by
// TestManifestsRendered), which it decodes strictly into their k8s.io/api
// types, so that tests and harnesses edit the objects themselves rather
// than a copy of the YAML.
//
// Files:
//
//	doc.go          this comment
//	decode.go       CatenaYAML, UninstallYAML and Decode: the manifests embedded, decoded into typed objects
//	catena.yaml     the Namespace, ServiceAccount, RBAC, ConfigMap and the DaemonSet that runs catena-agent
//	uninstall.yaml  its Namespace and the DaemonSet that runs catena-agent uninstall on every node
//	chart/catena/   the Helm chart: values.yaml, values.schema.json, templates/, files/catena-rules.yaml
//	monitoring/     Prometheus's scrape job, the alerting rules and their promtool tests, a Grafana dashboard
package deploy
