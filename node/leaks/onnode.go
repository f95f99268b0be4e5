package leaks

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/reconcile"
)

// OnNode is what a scan and a release need on the node this process runs
// on: catenactl's and the agent's Scanner and Releaser come from it.
type OnNode struct {
	// ConfDir holds the networks' configs; ResultsDir is the runtime's
	// libcni cache; CacheDir is Catena's.
	ConfDir, ResultsDir, CacheDir string
	Sandboxes                     reconcile.SandboxLister
	// Runtime names the runtime for the report.
	Runtime string
	// Node is the node's name ("": the hostname).
	Node   string
	MinAge time.Duration
	Now    func() time.Time
	// CNIPath, Exec and OnOp are the Releaser's.
	CNIPath string
	Exec    libchain.Executor
	OnOp    func(events.Op)
}

// Scanner is the node's Scanner: the real nat table, live namespaces and
// bridges, the node's boot ID.
func (o OnNode) Scanner() (*Scanner, error) {
	node := o.Node
	if node == "" {
		var err error
		if node, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("node name: %w", err)
		}
	}
	boot, err := BootID(afero.NewOsFs())
	if err != nil {
		return nil, err
	}
	return &Scanner{Fs: afero.NewOsFs(), ConfDir: o.ConfDir, ResultsDir: o.ResultsDir, CacheDir: o.CacheDir,
		Sandboxes: o.Sandboxes, Runtime: o.Runtime, NAT: NATTable, Live: LiveNamespaces, Veths: BridgeVeths,
		Node: node, BootID: boot, MinAge: o.MinAge, Now: o.Now}, nil
}

// Releaser is the node's Releaser.
func (o OnNode) Releaser(dryRun bool) *Releaser {
	return &Releaser{Fs: afero.NewOsFs(), ConfDir: o.ConfDir, CacheDir: o.CacheDir, CNIPath: o.CNIPath,
		Exec: o.Exec, NAT: NATTable, OnOp: o.OnOp, DryRun: dryRun}
}
