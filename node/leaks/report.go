package leaks

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

// ReportVersion is the version of the report's JSON (doc.go).
const ReportVersion = 1

// MaxReport bounds a report file read back: a node with 10,000
// reservations makes a few MiB.
const MaxReport = 64 << 20

// The kinds of finding.
const (
	// KindHostLocal is a host-local reservation: a file named by the IP
	// in the range's data dir, holding its owner's container ID and
	// ifname.
	KindHostLocal = "host-local"
	// KindFlannel is flannel's scratch file of one container: the
	// delegate config its DEL consumes, named by the container ID.
	KindFlannel = "flannel"
	// KindLibcni is an entry of the runtime's libcni result cache.
	KindLibcni = "libcni-cache"
	// KindPortmap is portmap's DNAT chain of one container.
	KindPortmap = "portmap"
	// KindVeth is a veth on a network's bridge whose peer is in a
	// namespace no process is in and no mount under /run/netns holds: it
	// is reported, never released (no DEL removes it without its
	// namespace, and the namespace frees it when it goes).
	KindVeth = "veth"
	// KindRecord is a Catena record: its reconciler tears it down by the
	// record; it is listed, never released here.
	KindRecord = "catena-record"
)

// Kinds lists every kind, in the report's order.
var Kinds = []string{KindHostLocal, KindPortmap, KindFlannel, KindVeth, KindLibcni, KindRecord}

// Verdicts.
const (
	Leak = "leak"
	Keep = "keep"
)

// Owner is who a finding belongs to, by the network's own bookkeeping.
type Owner struct {
	Network     string `json:"network"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname,omitempty"`
}

// Delegate is the plugin of the network's config that made a finding and
// whose DEL releases it: its index in the config's plugins and its type
// (for a host-local reservation, the plugin whose ipam is host-local).
type Delegate struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
}

// Finding is one thing a network holds on the node.
type Finding struct {
	Kind  string `json:"kind"`
	Owner Owner  `json:"owner"`
	// Item names the thing itself: the IP of a reservation, the chain
	// of a portmap rule, the file of a cache entry or a record.
	Item string `json:"item"`
	// Evidence is where it was read: the reservation's file, the rule.
	Evidence string `json:"evidence"`
	// Since is when it was made, as far as the node tells (the file's
	// mtime); zero when unknown.
	Since time.Time `json:"since,omitzero"`
	// Delegate releases it; nil when no config of the network names one.
	Delegate *Delegate `json:"delegate,omitempty"`
	// CachedConfig is the runtime's libcni cache entry of the owner,
	// when it has one: its config, what the owner's ADD ran with, is the
	// one Delegate is found in and DELed with; else the conf dir's.
	CachedConfig string `json:"cachedConfig,omitempty"`
	Verdict      string `json:"verdict"`
	// Why the verdict: what proves a leak, or the first doubt that keeps
	// it.
	Why string `json:"why"`
}

// Key identifies a finding across reports: the same thing, the same owner.
func (f Finding) Key() string {
	return f.Kind + "\x00" + f.Owner.Network + "\x00" + f.Owner.ContainerID + "\x00" + f.Owner.IfName + "\x00" + f.Item
}

// Input is one thing a report read, and what it found there.
type Input struct {
	What  string `json:"what"`
	Where string `json:"where"`
	// Count is how many entries it held (sandboxes, files).
	Count int    `json:"count"`
	Error string `json:"error,omitempty"`
}

// Report is one look at the node.
type Report struct {
	Version int    `json:"version"`
	Node    string `json:"node"`
	BootID  string `json:"bootID"`
	// Time is when the look began: every finding was read after it.
	Time time.Time `json:"time"`
	// MinAge is the age under which a finding is kept.
	MinAge   time.Duration `json:"minAgeNs"`
	Inputs   []Input       `json:"inputs"`
	Findings []Finding     `json:"findings"`
}

// Leaks are the report's findings whose verdict is Leak.
func (r *Report) Leaks() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Verdict == Leak {
			out = append(out, f)
		}
	}
	return out
}

// Counts are the report's findings by kind and verdict.
func (r *Report) Counts() map[string]map[string]int {
	c := map[string]map[string]int{}
	for _, f := range r.Findings {
		if c[f.Kind] == nil {
			c[f.Kind] = map[string]int{}
		}
		c[f.Kind][f.Verdict]++
	}
	return c
}

// ReadReport reads a report written by Marshal, refusing a file another
// user could have written, a symlink, one over MaxReport, and another
// version.
func ReadReport(fsys afero.Fs, path string) (*Report, error) {
	fi, err := fileutil.Lstat(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", path, err)
	}
	if err := fileutil.CheckPrivateFile(path, fi); err != nil {
		return nil, fmt.Errorf("report %s: %w", path, err)
	}
	b, err := fileutil.ReadSmallFile(fsys, path, MaxReport, true)
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", path, err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("report %s: not a leak report: %w", path, err)
	}
	if r.Version != ReportVersion {
		return nil, fmt.Errorf("report %s: version %d, this catenactl reads %d", path, r.Version, ReportVersion)
	}
	if r.Node == "" || r.BootID == "" || r.Time.IsZero() {
		return nil, errors.New("report " + path + ": no node, boot ID or time")
	}
	return &r, nil
}
