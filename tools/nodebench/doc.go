// Package nodebench is the node-density benchmark's arithmetic: what the
// Kubernetes node harness (integration/k8s_density_test.go, make
// bench-node) measures in each round, turned into percentiles, ratios,
// tables, CSV files and a CDF plot. It runs no cluster: the harness feeds
// it the pods' watch events, the metrics it scraped and Catena's journal,
// and its tests feed it fakes.
//
// A round is one variant of the node (the primary alone, or Catena
// installed over it) and one N: a Deployment scaled from 0 to N at once,
// until every pod is Ready, then to 0, until every pod is gone. The
// variants alternate A B B A A B ... (Schedule), so that neither always
// runs first or on a warmer node.
//
// Per pod, from the watch events as they are received (each timestamped
// on receipt, in ms, as kube-burner's podLatency does; the API's
// condition times have a resolution of one second): created (the first
// event) -> scheduled (PodScheduled True) -> sandbox ready
// (PodReadyToStartContainers True) -> Ready; delete (the first event with
// a deletionTimestamp) -> gone (DELETED). Per round, the delta of
// histograms scraped before and after it: kubelet's
// kubelet_pod_start_sli_duration_seconds and, on a containerd node,
// containerd's CNI setup and teardown
// (containerd_cri_network_plugin_operations_duration_seconds_seconds, by
// operation_type); their quantiles are interpolated within the buckets,
// as Prometheus's histogram_quantile does. On a CRI-O node, which keeps no
// such histogram, each pod's CNI ADD, RunPodSandbox and StopPodSandbox
// from the times of CRI-O's log lines (CRIOLog). In Catena's rounds, the
// ADDs', DELs' and CHECKs' durations from its journal, and their own work
// (the duration less the delegates' calls).
//
// Files:
//
//	doc.go       this comment
//	config.go    the environment the harness reads (N list, rounds, where to write, perf), the schedule, the load average
//	timeline.go  Pod and Tracker: each pod's times from the watch events
//	dist.go      Dist and Hist: samples or a histogram's delta, and their quantiles
//	measure.go   the measures, and the Dists of a round's pods and journal
//	report.go    Summarize, the table, the CSV files and the plot
//	interval.go  the 95% bootstrap interval over rounds of a p50 ratio
//	cpu.go       a round's perf profile: CPU seconds by command, and its table
//	cpustat.go   the machine's busy and idle CPU time, from /proc/stat
//	crio.go      CRIOLog: a CRI-O node's CNI and sandbox times, from CRI-O's log
package nodebench
