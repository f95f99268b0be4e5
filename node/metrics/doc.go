// Package metrics is Catena's Prometheus registry for catena-agent run:
// operations from the event journal and where their time went, records
// by network and phase, held attachments, the reconciler's passes, the
// install's adoptions and its contests over the generated conflist.
//
// Files:
//
//	doc.go        this comment
//	metrics.go    Metrics: the registry and its collectors; operations, passes, adoptions and the conflist's writes observed
//	delegates.go  opTimes: where an operation's time went (each delegate call, the lock wait, the record writes), its labels bounded
//	handler.go    Handler: /metrics, the journal read before each scrape; NewJournalTail, the journal's new lines across a rotation
//	probes.go     ReadinessGauge and WritableGauges: gauges evaluated at each scrape
package metrics
