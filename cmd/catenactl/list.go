package main

import (
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cache"
)

// listRow is one attachment as `list --json` prints it.
type listRow struct {
	Network          string     `json:"network"`
	ContainerID      string     `json:"containerID"`
	IfName           string     `json:"ifName"`
	Phase            string     `json:"phase"`
	Created          *time.Time `json:"created,omitempty"`
	AgeSeconds       float64    `json:"ageSeconds"`
	TeardownAttempts int        `json:"teardownAttempts"`
	// NextAttempt is when the teardown is next retried (a retrier or the
	// agent), for a record that needs one.
	NextAttempt *time.Time     `json:"nextAttempt,omitempty"`
	LastError   string         `json:"lastError,omitempty"`
	Delegates   []listDelegate `json:"delegates"`
	// Error says why the record could not be read; Phase is then
	// "unreadable".
	Error string `json:"error,omitempty"`
	// states is Delegates rendered for the table.
	states string
}

type listDelegate struct {
	Index int             `json:"index"`
	Type  string          `json:"type"`
	State cache.StepState `json:"state"`
}

const phaseUnreadable = "unreadable"

func (a *app) listCmd() *cobra.Command {
	var network string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every recorded attachment with its phase, age and per-delegate state",
		Long: `List every attachment recorded in the cache dir, of every network that shares
it: network, container ID, ifname, phase (adding, complete, tearing-down,
needs-teardown), age, teardown attempts so far, when the teardown is next
retried (NEXT: how long until then, "now" when due, "-" for none), and the state of each delegate in
chain order (pending, starting, added, add-failed, unknown, del-failed,
deleted, abandoned). A record that cannot be read is listed as unreadable,
with why.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, entries, err := a.cacheEntries()
			if err != nil {
				return err
			}
			rows := []listRow{}
			for _, e := range entries {
				if network == "" || e.Key.Network == network {
					rows = append(rows, a.listRowOf(e))
				}
			}
			if a.json {
				return writeJSON(a.stdout, rows)
			}
			return printList(a, rows)
		},
	}
	cmd.Flags().StringVar(&network, "network", "", "list only this network's attachments")
	return cmd
}

func (a *app) listRowOf(e entry) listRow {
	row := listRow{Network: e.Key.Network, ContainerID: e.Key.ContainerID, IfName: e.Key.IfName, Delegates: []listDelegate{}}
	if e.Err != nil {
		row.Phase, row.Error = phaseUnreadable, e.Err.Error()
		return row
	}
	created := e.Rec.Created.UTC()
	row.Phase = string(e.Rec.Phase)
	row.Created = &created
	row.AgeSeconds = a.now().Sub(e.Rec.Created).Seconds()
	row.TeardownAttempts = e.Rec.TeardownAttempts
	if e.Note != nil && e.Rec.Phase != cache.PhaseComplete {
		next := e.Note.Due.UTC()
		row.NextAttempt = &next
	}
	row.LastError = e.Rec.LastError
	for _, s := range e.Rec.Steps {
		row.Delegates = append(row.Delegates, listDelegate{Index: s.Index, Type: s.Type, State: s.State})
	}
	row.states = delegateStates(e.Rec)
	return row
}

func printList(a *app, rows []listRow) error {
	t := newTable(a.stdout, "NETWORK", "CONTAINER", "IFNAME", "PHASE", "AGE", "ATTEMPTS", "NEXT", "DELEGATES")
	for _, r := range rows {
		if r.Error != "" {
			t.row(r.Network, r.ContainerID, r.IfName, r.Phase, "-", "-", "-", r.Error)
			continue
		}
		age := humanAge(time.Duration(r.AgeSeconds * float64(time.Second)))
		t.row(r.Network, r.ContainerID, r.IfName, r.Phase, age, strconv.Itoa(r.TeardownAttempts), a.nextIn(r.NextAttempt), orDash(r.states))
	}
	return t.flush()
}

// nextIn renders when a teardown is next retried: "-" for none, "now"
// when due, else how long until then.
func (a *app) nextIn(next *time.Time) string {
	switch {
	case next == nil:
		return "-"
	case !next.After(a.now()):
		return "now"
	}
	return humanAge(next.Sub(a.now()))
}
