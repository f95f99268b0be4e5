package nodebench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// CRI-O keeps no histogram of its CNI calls (its network_setup_pod is a
// gauge of the last one), so on a CRI-O node a round's runtime measures
// come from the lines CRI-O logs at level info, each with its time in ns:
//
//	Running pod sandbox: NS/NAME/POD                    RunPodSandbox starts
//	Adding pod NS_NAME to CNI network "NET" (type=T)    the CNI ADD starts
//	Checking pod NS_NAME for CNI network NET (type=T)   the ADD returned; CHECK starts
//	Ran pod sandbox ID with infra container: NS/NAME/POD
//	                                                    ADD, CHECK and the infra container done
//	Stopping pod sandbox: ID                            StopPodSandbox starts (its DEL first)
//	Stopped pod sandbox: ID                             DEL and the infra container's stop done
//
// CHECK's own end is logged only at level debug; Catena's journal times
// it in Catena's rounds.
var (
	CRIOAdd         = Measure{"crio_cni_add", "CRI-O CNI ADD (log)"}
	CRIORunSandbox  = Measure{"crio_run_sandbox", "CRI-O RunPodSandbox (log)"}
	CRIOStopSandbox = Measure{"crio_stop_sandbox", "CRI-O StopPodSandbox (log)"}
)

// The messages CRIOLog.Read reads, as CRI-O v1.34 words them.
const (
	crioRunning  = "Running pod sandbox: "
	crioRan      = "Ran pod sandbox "
	crioRanInfra = " with infra container: "
	crioAdding   = "Adding pod "
	crioChecking = "Checking pod "
	crioStopping = "Stopping pod sandbox: "
	crioStopped  = "Stopped pod sandbox: "
	crioCNINet   = " CNI network "
)

// crioPod is what CRI-O's log said of one pod's sandbox.
type crioPod struct {
	running, ran, adding, checking, stopping, stopped time.Time
}

// CRIOLog is CRI-O's log of a round, read line by line: the times it
// logged for each pod whose name starts with the prefix given to
// NewCRIOLog, and the sandbox IDs it ran for them.
type CRIOLog struct {
	prefix string
	pods   map[string]*crioPod // by pod name
	ids    map[string]string   // sandbox ID -> pod name
}

// NewCRIOLog is an empty CRIOLog of the pods named podPrefix*.
func NewCRIOLog(podPrefix string) *CRIOLog {
	return &CRIOLog{prefix: podPrefix, pods: map[string]*crioPod{}, ids: map[string]string{}}
}

// Read reads CRI-O's log lines from r (logrus's text format: time="..."
// level=... msg="..." ...), keeping the first time of each step of each
// pod; lines of other pods, other messages and lines without a time or a
// message are skipped.
func (l *CRIOLog) Read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		at, msg, ok := ParseLogrusLine(sc.Text())
		if ok {
			l.observe(at, msg)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("crio log: %w", err)
	}
	return nil
}

// observe records one message logged at at.
func (l *CRIOLog) observe(at time.Time, msg string) {
	set := func(name string, field func(*crioPod) *time.Time) {
		if !strings.HasPrefix(name, l.prefix) {
			return
		}
		p := l.pods[name]
		if p == nil {
			p = &crioPod{}
			l.pods[name] = p
		}
		if f := field(p); f.IsZero() {
			*f = at
		}
	}
	byID := func(id string, field func(*crioPod) *time.Time) {
		if name, ok := l.ids[id]; ok {
			set(name, field)
		}
	}
	switch {
	case strings.HasPrefix(msg, crioRunning):
		set(descriptionPod(strings.TrimPrefix(msg, crioRunning)), func(p *crioPod) *time.Time { return &p.running })
	case strings.HasPrefix(msg, crioRan):
		id, desc, ok := strings.Cut(strings.TrimPrefix(msg, crioRan), crioRanInfra)
		if name := descriptionPod(desc); ok && strings.HasPrefix(name, l.prefix) {
			l.ids[id] = name
			set(name, func(p *crioPod) *time.Time { return &p.ran })
		}
	case strings.HasPrefix(msg, crioAdding):
		set(fullPodName(strings.TrimPrefix(msg, crioAdding)), func(p *crioPod) *time.Time { return &p.adding })
	case strings.HasPrefix(msg, crioChecking):
		set(fullPodName(strings.TrimPrefix(msg, crioChecking)), func(p *crioPod) *time.Time { return &p.checking })
	case strings.HasPrefix(msg, crioStopping):
		byID(strings.TrimPrefix(msg, crioStopping), func(p *crioPod) *time.Time { return &p.stopping })
	case strings.HasPrefix(msg, crioStopped):
		byID(strings.TrimPrefix(msg, crioStopped), func(p *crioPod) *time.Time { return &p.stopped })
	}
}

// descriptionPod is NAME of "NS/NAME/CONTAINER".
func descriptionPod(desc string) string {
	parts := strings.Split(desc, "/")
	if len(parts) != 3 {
		return ""
	}
	return parts[1]
}

// fullPodName is NAME of "NS_NAME to CNI network ..." or "NS_NAME for
// CNI network ..." (a namespace has no "_").
func fullPodName(rest string) string {
	full, _, ok := strings.Cut(rest, " ")
	if !ok || !strings.Contains(rest, crioCNINet) {
		return ""
	}
	_, name, _ := strings.Cut(full, "_")
	return name
}

// ParseLogrusLine splits a line of logrus's text format (CRI-O's log:
// time="..." level=... msg="..." ...) into its time and message; false
// when it has either missing or malformed.
func ParseLogrusLine(line string) (time.Time, string, bool) {
	ts, ok := logfmtValue(line, "time")
	if !ok {
		return time.Time{}, "", false
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, "", false
	}
	msg, ok := logfmtValue(line, "msg")
	return at, msg, ok
}

// logfmtValue is the value of key in a logfmt line: quoted (Go's
// escapes, as logrus quotes) or bare up to the next space.
func logfmtValue(line, key string) (string, bool) {
	i := strings.Index(" "+line, " "+key+"=")
	if i < 0 {
		return "", false
	}
	rest := line[i+len(key)+1:]
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", false
		}
		v, err := strconv.Unquote(q)
		return v, err == nil
	}
	v, _, _ := strings.Cut(rest, " ")
	return v, true
}

// Pods is how many of the prefix's pods the log named.
func (l *CRIOLog) Pods() int { return len(l.pods) }

// Unstopped are the sandbox IDs CRI-O ran for the pods and has not
// logged stopping.
func (l *CRIOLog) Unstopped() []string {
	var out []string
	for id, name := range l.ids {
		if l.pods[name].stopped.IsZero() {
			out = append(out, id)
		}
	}
	return out
}

// Dists are the CRI-O measures' samples, by Measure.ID: each pod's span
// whose both ends were logged.
func (l *CRIOLog) Dists() map[string]Dist {
	var add, run, stop Dist
	span := func(d *Dist, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() && !to.Before(from) {
			d.samples = append(d.samples, to.Sub(from))
		}
	}
	for _, p := range l.pods {
		span(&add, p.adding, p.checking)
		span(&run, p.running, p.ran)
		span(&stop, p.stopping, p.stopped)
	}
	return map[string]Dist{CRIOAdd.ID: add, CRIORunSandbox.ID: run, CRIOStopSandbox.ID: stop}
}
