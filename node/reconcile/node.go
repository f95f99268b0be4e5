package reconcile

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/invoke"
)

// NodeConfig is what catena-agent run and catenactl reconcile pass to
// reconcile a node's cache dir through its real runtime and delegates.
type NodeConfig struct {
	CacheDir        string
	RuntimeEndpoint string
	Options         Options
	Log             *slog.Logger
	// Backoff decides when a record that needs teardown is retried; nil:
	// the teardown index's pending markers (IndexBackoff).
	Backoff  Backoff
	Observer Observer
	// DelegateStderr receives the delegates' stderr; nil discards it.
	DelegateStderr io.Writer
}

// NewNode wires a Reconciler to the cache dir on disk (flock locks, durable
// marks), the CRI runtime at RuntimeEndpoint and the delegates in
// Options.CNIPath; the engine's operations are appended to the event
// journal as the catena plugin's are. Close the returned lister when done.
func NewNode(c NodeConfig) (*Reconciler, *CRILister, error) {
	if c.CacheDir == "" || !filepath.IsAbs(c.CacheDir) {
		return nil, nil, fmt.Errorf("cache dir %q: must be an absolute path", c.CacheDir)
	}
	if c.RuntimeEndpoint == "" {
		return nil, nil, fmt.Errorf("no runtime endpoint")
	}
	lister, err := DialCRI(c.RuntimeEndpoint)
	if err != nil {
		return nil, nil, err
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// One trusted filesystem of the cache dir for the store, the marks,
	// the version cache and the event journal.
	fsys := fileutil.TrustedFs(afero.NewOsFs(), c.CacheDir)
	store := cache.NewDiskStore(fsys, c.CacheDir, cache.NewFlockLocker(filepath.Join(c.CacheDir, cache.LocksDir)))
	exec := invoke.NewExec(c.DelegateStderr)
	eng := &libchain.Engine{
		Store:    store,
		Exec:     exec,
		Versions: libchain.NewCachedProber(exec, fsys, c.CacheDir, log),
		Log:      log,
		OnOp:     events.OnOp(fsys, c.CacheDir, log),
	}
	bo := c.Backoff
	if bo == nil {
		bo = IndexBackoff{Notes: store}
	}
	r := &Reconciler{Store: store, Marks: cache.NewDiskMarks(fsys, c.CacheDir), Runtime: lister,
		NetNS: ProcNetNS{}, Engine: eng, Backoff: bo, Observer: c.Observer, Log: log, Opts: c.Options, RetrierDir: c.CacheDir}
	return r, lister, nil
}
