// Package metrics is Catena's Prometheus registry for catena-agent run:
// operations from the event journal, records by network and phase, held
// attachments, the reconciler's passes, the install's adoptions and its
// contests over the generated conflist.
//
// Files:
//
//	doc.go      this comment
//	metrics.go  Metrics: the registry and its collectors; operations, passes, adoptions and the conflist's writes observed
//	handler.go  Handler: /metrics, the journal read before each scrape; NewJournalTail, the journal's new lines across a rotation
//	probes.go   ReadinessGauge and WritableGauges: gauges evaluated at each scrape
package metrics
