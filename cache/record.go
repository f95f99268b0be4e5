package cache

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/utils"
)

// SchemaVersion is the version of the record layout written by this build,
// and of a full-snapshot entry; a delta entry is schema 2
// (delta.go). Entries of a schema above 2 are refused (ErrCorrupt wrapping
// ErrFutureSchema) rather than misread.
const SchemaVersion = 1

// Key names one attachment.
type Key struct {
	Network     string `json:"network"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// String renders the key as network/container/ifname for messages.
func (k Key) String() string {
	return k.Network + "/" + k.ContainerID + "/" + k.IfName
}

// Validate rejects any key part that could escape the cache dir or is not a
// legal CNI name. It uses the CNI spec's own rules, and requires UTF-8 (the
// network name and container ID rules already imply it).
func (k Key) Validate() error {
	if err := utils.ValidateNetworkName(k.Network); err != nil {
		return fmt.Errorf("network name %q: %w", k.Network, err)
	}
	if err := utils.ValidateContainerID(k.ContainerID); err != nil {
		return fmt.Errorf("container ID %q: %w", k.ContainerID, err)
	}
	if err := utils.ValidateInterfaceName(k.IfName); err != nil {
		return fmt.Errorf("ifname %q: %w", k.IfName, err)
	}
	// The record is JSON, whose strings are UTF-8: a key that is not would
	// not load back as itself.
	if !utf8.ValidString(k.IfName) {
		return fmt.Errorf("ifname %q: not valid UTF-8", k.IfName)
	}
	return nil
}

// Phase is where an attachment stands as a whole.
type Phase string

const (
	// PhaseAdding: an ADD is (or was, if the process died) running the chain.
	PhaseAdding Phase = "adding"
	// PhaseComplete: every delegate's ADD succeeded.
	PhaseComplete Phase = "complete"
	// PhaseTearingDown: a rollback or DEL is (or was) running.
	PhaseTearingDown Phase = "tearing-down"
	// PhaseNeedsTeardown: a rollback or DEL stopped at a failed DEL; the
	// delegates still held must be torn down by a later attempt.
	PhaseNeedsTeardown Phase = "needs-teardown"
)

// StepState is what is known of one delegate.
type StepState string

const (
	// StepPending: never started; holds nothing.
	StepPending StepState = "pending"
	// StepStarting: ADD was about to be invoked or was running. If the
	// record still says so after a crash, the outcome is unknown.
	StepStarting StepState = "starting"
	// StepAdded: ADD returned success; the step holds resources.
	StepAdded StepState = "added"
	// StepAddFailed: ADD returned an error; it may hold partial state and
	// gets a best-effort DEL.
	StepAddFailed StepState = "add-failed"
	// StepUnknown: ADD was killed or timed out; best-effort DEL.
	StepUnknown StepState = "unknown"
	// StepDelFailed: a required DEL failed; the step is still held.
	StepDelFailed StepState = "del-failed"
	// StepDeleted: DEL succeeded (or the best-effort DEL was attempted);
	// holds nothing.
	StepDeleted StepState = "deleted"
	// StepAbandoned: an operator gave up on this step's DEL.
	StepAbandoned StepState = "abandoned"
)

// Step is the record of one delegate.
type Step struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	// CNIVersion is the version the delegate was called with.
	CNIVersion string `json:"cniVersion"`
	// Config is the delegate's network config exactly as sent on ADD,
	// without prevResult. DEL and CHECK reuse it.
	Config json.RawMessage `json:"config"`
	State  StepState       `json:"state"`
	// Result is the delegate's ADD result, in CNIVersion.
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Started  time.Time       `json:"started,omitzero"`
	Finished time.Time       `json:"finished,omitzero"`
	// DelAttempts counts DEL attempts of this step; DelError is the last.
	DelAttempts int       `json:"delAttempts,omitempty"`
	DelError    string    `json:"delError,omitempty"`
	AbandonedAt time.Time `json:"abandonedAt,omitzero"`

	// DelFailedSince is when this step's required DEL first failed, in
	// the failures since its last success: abandonAfter counts from it.
	DelFailedSince time.Time `json:"delFailedSince,omitzero"`
}

// Held reports whether the step may hold resources that need a DEL.
func (s Step) Held() bool {
	switch s.State {
	case StepStarting, StepAdded, StepAddFailed, StepUnknown, StepDelFailed:
		return true
	}
	return false
}

// Required reports whether a failure of this step's DEL must stop teardown.
// Best-effort steps (failed or unknown ADD) never block it.
func (s Step) Required() bool {
	return s.State == StepAdded || s.State == StepDelFailed
}

// NetNSIdentity tells one network namespace from another that later
// appears at the same path. Dev and Ino are those of the nsfs file; the
// kernel reuses the inode number of a freed namespace, so ID, a 64-bit
// number the kernel never reuses (NS_GET_ID, else the netns cookie), is
// kept too where the kernel provides one (0 otherwise).
type NetNSIdentity struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	ID  uint64 `json:"id,omitempty"`
}

// Record is everything Catena knows of one attachment.
type Record struct {
	Schema int   `json:"schema"`
	Key    Key   `json:"key"`
	Phase  Phase `json:"phase"`
	// CNIVersion is Catena's own cniVersion at ADD.
	CNIVersion string `json:"cniVersion"`
	NetNS      string `json:"netns,omitempty"`
	// NetNSID is the identity of the namespace at NetNS at ADD, so that a
	// teardown no runtime asked for passes NetNS only while the file there
	// is still that namespace. Absent when the namespace could not be
	// identified at ADD, or in a record adopted from the runtime's libcni
	// cache: its NetNS cannot be verified, and such teardowns pass no netns.
	NetNSID *NetNSIdentity `json:"netnsID,omitempty"`
	Args    string         `json:"args,omitempty"`
	// PrevResult is the prevResult Catena itself received on ADD, if any.
	PrevResult json.RawMessage `json:"prevResult,omitempty"`
	Steps      []Step          `json:"steps"`
	// Result is the final result of a complete ADD, in CNIVersion.
	Result json.RawMessage `json:"result,omitempty"`
	// AddError is why the ADD failed, if it did.
	AddError string    `json:"addError,omitempty"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	// TeardownAttempts counts rollbacks and DELs; LastError is the last
	// teardown error.
	TeardownAttempts int    `json:"teardownAttempts,omitempty"`
	LastError        string `json:"lastError,omitempty"`
}
