package nodebench

import (
	"fmt"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/catena-cni/catena/libchain/events"
)

// Measure is one quantity of the report.
type Measure struct {
	ID    string // its key, in the CSV files
	Label string // in the table
}

// The measures, from the watch (per pod), the scraped histograms (per
// round) and Catena's journal (its rounds only).
var (
	createdScheduled = Measure{"created_scheduled", "created -> scheduled"}
	scheduledSandbox = Measure{"scheduled_sandbox_ready", "scheduled -> sandbox ready"}
	sandboxReady     = Measure{"sandbox_ready_ready", "sandbox ready -> Ready"}
	CreatedReady     = Measure{"created_ready", "created -> Ready"}
	deleteGone       = Measure{"delete_gone", "delete -> gone"}
	KubeletStartSLI  = Measure{"kubelet_pod_start_sli", "kubelet pod start SLI (hist)"}
	CNISetup         = Measure{"containerd_cni_setup", "containerd CNI setup (hist)"}
	CNITeardown      = Measure{"containerd_cni_teardown", "containerd CNI teardown (hist)"}
	CatenaAdd        = Measure{"catena_add", "Catena ADD (journal)"}
	CatenaDel        = Measure{"catena_del", "Catena DEL (journal)"}
	CatenaCheck      = Measure{"catena_check", "Catena CHECK (journal)"}
	catenaAddOwn     = Measure{"catena_add_own", "Catena ADD, own work"}
	catenaDelOwn     = Measure{"catena_del_own", "Catena DEL, own work"}
	catenaAddLock    = Measure{"catena_add_lock_wait", "Catena ADD, lock wait"}
	catenaAddWrites  = Measure{"catena_add_writes", "Catena ADD, record writes"}
	catenaAddStartup = Measure{"catena_add_startup", "Catena ADD, process start-up"}
	catenaAddCPU     = Measure{"catena_add_cpu", "Catena ADD, process CPU"}
	catenaAddDelay   = Measure{"catena_add_run_delay", "Catena ADD, process run delay"}
)

// podMeasures are the measures of each pod's timeline, in the pods CSV's
// order.
var podMeasures = []Measure{createdScheduled, scheduledSandbox, sandboxReady, CreatedReady, deleteGone}

// measures are all of them, in the report's order.
var measures = append(append([]Measure{}, podMeasures...),
	KubeletStartSLI, CNISetup, CNITeardown, CRIOAdd, CRIORunSandbox, CRIOStopSandbox,
	CatenaAdd, CatenaDel, CatenaCheck, catenaAddOwn, catenaDelOwn,
	catenaAddLock, catenaAddWrites, catenaAddStartup, catenaAddCPU, catenaAddDelay)

// The scraped histograms: kubelet's pod start SLI (creation to observed
// running, image pulls excluded), and containerd 2.4's CRI network plugin
// operations (its go-metrics timer adds a second _seconds to the name).
const (
	kubeletStartSLIMetric = "kubelet_pod_start_sli_duration_seconds"
	ContainerdCNIMetric   = "containerd_cri_network_plugin_operations_duration_seconds_seconds"
	containerdSetUp       = "set_up_pod"
	ContainerdTearDown    = "tear_down_pod"
)

// span is the pod's value of a pod measure; false when a step was not
// seen, or m is not a pod measure.
func (p Pod) span(m Measure) (time.Duration, bool) {
	var from, to time.Time
	switch m {
	case createdScheduled:
		from, to = p.Created, p.Scheduled
	case scheduledSandbox:
		from, to = p.Scheduled, p.SandboxReady
	case sandboxReady:
		from, to = p.SandboxReady, p.Ready
	case CreatedReady:
		from, to = p.Created, p.Ready
	case deleteGone:
		from, to = p.Deleting, p.Gone
	default:
		return 0, false
	}
	if from.IsZero() || to.IsZero() {
		return 0, false
	}
	return to.Sub(from), true
}

// PodDists are the pod measures' samples over pods, by Measure.ID.
func PodDists(pods []Pod) map[string]Dist {
	out := map[string]Dist{}
	for _, m := range podMeasures {
		var d Dist
		for _, p := range pods {
			if v, ok := p.span(m); ok {
				d.samples = append(d.samples, v)
			}
		}
		out[m.ID] = d
	}
	return out
}

// JournalDists are the Catena measures of ops (a round's, from
// events.Read), by Measure.ID: of the successful ADDs, DELs and CHECKs on
// pods whose name starts with podPrefix, their durations, the ADDs' and
// DELs' own work (the duration less the delegates' calls), and the ADDs'
// lock waits, record writes and, from the process block of each, its
// start-up, CPU and run delay.
func JournalDists(ops []events.Op, podPrefix string) map[string]Dist {
	var add, del, check, addOwn, delOwn, lock, writes, startup, cpu, delay Dist
	for _, op := range ops {
		if op.Outcome != "ok" || op.Pod == nil || !strings.HasPrefix(op.Pod.Name, podPrefix) {
			continue
		}
		own := op.Duration
		for _, c := range op.Calls {
			own -= c.Duration
		}
		switch op.Verb {
		case "ADD":
			add.samples, addOwn.samples = append(add.samples, op.Duration), append(addOwn.samples, own)
			lock.samples, writes.samples = append(lock.samples, op.LockWait), append(writes.samples, op.Writes)
			if p := op.Process; p != nil {
				startup.samples = append(startup.samples, p.Startup)
				cpu.samples, delay.samples = append(cpu.samples, p.CPU), append(delay.samples, p.RunDelay)
			}
		case "DEL":
			del.samples, delOwn.samples = append(del.samples, op.Duration), append(delOwn.samples, own)
		case "CHECK":
			check.samples = append(check.samples, op.Duration)
		}
	}
	return map[string]Dist{CatenaAdd.ID: add, CatenaDel.ID: del, CatenaCheck.ID: check, catenaAddOwn.ID: addOwn, catenaDelOwn.ID: delOwn,
		catenaAddLock.ID: lock, catenaAddWrites.ID: writes, catenaAddStartup.ID: startup, catenaAddCPU.ID: cpu, catenaAddDelay.ID: delay}
}

// Verbs counts ops by verb, "ADD=30 DEL=62 STATUS=4" in the order of
// their first appearance: what the runtime asked of Catena in a round.
func Verbs(ops []events.Op) string {
	var order []string
	n := map[string]int{}
	for _, op := range ops {
		if n[op.Verb] == 0 {
			order = append(order, op.Verb)
		}
		n[op.Verb]++
	}
	parts := make([]string, len(order))
	for i, v := range order {
		parts[i] = fmt.Sprintf("%s=%d", v, n[v])
	}
	return strings.Join(parts, " ")
}

// Scrapes are the metrics scraped before and after a round, as expfmt
// parses them; containerd's are nil on a node of another runtime.
type Scrapes struct {
	KubeletBefore, KubeletAfter       map[string]*dto.MetricFamily
	ContainerdBefore, ContainerdAfter map[string]*dto.MetricFamily
}

// HistDists are the histogram measures of a round, by Measure.ID, of
// each endpoint scraped (both its scrapes nil: not scraped).
func (s Scrapes) HistDists() (map[string]Dist, error) {
	out := map[string]Dist{}
	for _, h := range []struct {
		m             Measure
		before, after map[string]*dto.MetricFamily
		name          string
		labels        map[string]string
	}{
		{KubeletStartSLI, s.KubeletBefore, s.KubeletAfter, kubeletStartSLIMetric, nil},
		{CNISetup, s.ContainerdBefore, s.ContainerdAfter, ContainerdCNIMetric, map[string]string{"operation_type": containerdSetUp}},
		{CNITeardown, s.ContainerdBefore, s.ContainerdAfter, ContainerdCNIMetric, map[string]string{"operation_type": ContainerdTearDown}},
	} {
		if h.before == nil && h.after == nil {
			continue // not scraped: a node without containerd, or a runtime's share alone
		}
		d, err := HistDelta(h.before, h.after, h.name, h.labels)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.m.Label, err)
		}
		out[h.m.ID] = Dist{hist: &d}
	}
	return out, nil
}
