package kevents

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/catena-cni/catena/libchain/events"
)

// Event reasons, as they appear in `kubectl get events`.
const (
	ReasonRolledBack       = "CatenaRolledBack"
	ReasonTeardownHeld     = "CatenaTeardownHeld"
	ReasonTeardownReleased = "CatenaTeardownReleased"
	ReasonReclaimed        = "CatenaReclaimed"
	ReasonTeardownsHeld    = "CatenaTeardownsHeld" // on the Node, past the threshold
)

// Event types (core/v1 EventTypeNormal and EventTypeWarning).
const (
	Normal  = "Normal"
	Warning = "Warning"
)

// Object is what an event is about: a Pod (Namespace, Name, UID) or the
// Node (Name).
type Object struct {
	Kind      string // "Pod" or "Node"
	Namespace string
	Name      string
	UID       string
}

// Fact is one event to record.
type Fact struct {
	Object  Object
	Type    string
	Reason  string
	Message string
}

// teardownVerbs are the operations that tear an attachment down. A CNI
// GC journals each attachment it tears down as a GC operation of that
// attachment (libchain.Engine.CollectGarbage); its operation of the whole
// network names no attachment and holds or releases nothing.
var teardownVerbs = map[string]bool{"DEL": true, "RETRY": true, "REPAIR": true, "RECLAIM": true, "GC": true}

// held is one attachment whose teardown stopped at a failed DEL.
type held struct {
	since time.Time
	pod   *events.OpPod
}

// Mapper maps operations to facts. It remembers which attachments hold
// a failed teardown, so that the teardown that heals one is reported as
// released and the Node's count and oldest can be told. It is not safe for
// concurrent use.
type Mapper struct {
	held map[string]held
}

// NewMapper returns a Mapper that knows of no held teardown.
func NewMapper() *Mapper { return &Mapper{held: map[string]held{}} }

// Map returns the facts of one operation: none for an operation of no pod
// or of no interest.
func (m *Mapper) Map(op events.Op) []Fact {
	var facts []Fact
	failedDel := failedCalls(op, "DEL")
	switch {
	case op.Verb == "ADD" && op.Rollback:
		at := "an unknown delegate"
		if c := failedCalls(op, "ADD"); len(c) > 0 {
			at = delegate(c[0])
		}
		msg := fmt.Sprintf("ADD of %s failed at %s: %s; rolled back %s", op.Attachment, at, op.Error,
			orNone(delegates(okCalls(op, "DEL"))))
		// Only the DEL of a delegate whose ADD succeeded is required: a
		// failed best-effort DEL (of the delegate that failed) holds nothing.
		if held := requiredFailures(op, failedDel); len(held) > 0 {
			msg += "; still held: " + delegates(held)
			m.hold(op)
		} else {
			msg += "; nothing is held"
		}
		facts = append(facts, m.podFact(op, Warning, ReasonRolledBack, msg))
	case teardownVerbs[op.Verb] && op.Outcome != "ok" && len(failedDel) > 0:
		m.hold(op)
		// Teardown goes on past failed best-effort DELs and stops at the
		// first required one, in reverse order: the last failure.
		stop := failedDel[len(failedDel)-1]
		msg := fmt.Sprintf("%s of %s: DEL of %s failed: %s; held: %s and the delegates before it; the agent's retry tries again",
			op.Verb, op.Attachment, delegate(stop), stop.Error, delegate(stop))
		facts = append(facts, m.podFact(op, Warning, ReasonTeardownHeld, msg))
	case teardownVerbs[op.Verb] && op.Outcome == "ok":
		if h, ok := m.held[op.Attachment]; ok {
			delete(m.held, op.Attachment)
			if op.Pod == nil {
				op.Pod = h.pod
			}
			msg := fmt.Sprintf("%s of %s released what was held since %s", op.Verb, op.Attachment,
				h.since.UTC().Format(time.RFC3339))
			facts = append(facts, m.podFact(op, Normal, ReasonTeardownReleased, msg))
		}
		if op.Verb == "RECLAIM" {
			msg := fmt.Sprintf("the runtime no longer has the sandbox of %s: Catena tore it down (%s)",
				op.Attachment, orNone(delegates(okCalls(op, "DEL"))))
			facts = append(facts, m.podFact(op, Normal, ReasonReclaimed, msg))
		}
	case op.Verb == "ABANDON":
		delete(m.held, op.Attachment)
	}
	var out []Fact
	for _, f := range facts {
		if f.Object.Name != "" {
			out = append(out, f)
		}
	}
	return out
}

// Held returns how many teardowns are held and the oldest of them.
func (m *Mapper) Held() (n int, oldest string, since time.Time) {
	keys := make([]string, 0, len(m.held))
	for k := range m.held {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if h := m.held[k]; oldest == "" || h.since.Before(since) {
			oldest, since = k, h.since
		}
	}
	return len(m.held), oldest, since
}

// NodeHeld returns the Node's Warning when at least threshold teardowns
// are held (threshold <= 0 disables it).
func (m *Mapper) NodeHeld(node string, threshold int) (Fact, bool) {
	n, oldest, since := m.Held()
	if threshold <= 0 || n < threshold || node == "" {
		return Fact{}, false
	}
	return Fact{Object: Object{Kind: "Node", Name: node}, Type: Warning, Reason: ReasonTeardownsHeld,
		Message: fmt.Sprintf("%d teardowns are held (threshold %d); the oldest is %s, since %s", n, threshold,
			oldest, since.UTC().Format(time.RFC3339))}, true
}

func (m *Mapper) hold(op events.Op) {
	if _, ok := m.held[op.Attachment]; !ok && op.Attachment != "" {
		m.held[op.Attachment] = held{since: op.Start, pod: op.Pod}
	}
}

func (m *Mapper) podFact(op events.Op, typ, reason, msg string) Fact {
	var o Object
	if op.Pod != nil {
		o = Object{Kind: "Pod", Namespace: op.Pod.Namespace, Name: op.Pod.Name, UID: op.Pod.UID}
	}
	return Fact{Object: o, Type: typ, Reason: reason, Message: msg}
}

func failedCalls(op events.Op, verb string) []events.OpCall {
	var out []events.OpCall
	for _, c := range op.Calls {
		if c.Verb == verb && c.Error != "" {
			out = append(out, c)
		}
	}
	return out
}

// requiredFailures are the failed DELs of delegates whose ADD succeeded
// in op.
func requiredFailures(op events.Op, failed []events.OpCall) []events.OpCall {
	added := map[int]bool{}
	for _, c := range okCalls(op, "ADD") {
		added[c.Index] = true
	}
	var out []events.OpCall
	for _, c := range failed {
		if added[c.Index] {
			out = append(out, c)
		}
	}
	return out
}

func okCalls(op events.Op, verb string) []events.OpCall {
	var out []events.OpCall
	for _, c := range op.Calls {
		if c.Verb == verb && c.Error == "" {
			out = append(out, c)
		}
	}
	return out
}

func delegate(c events.OpCall) string { return fmt.Sprintf("delegate %d (%s)", c.Index, c.Type) }

func delegates(cs []events.OpCall) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = delegate(c)
	}
	return strings.Join(names, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
