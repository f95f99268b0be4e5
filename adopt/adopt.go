// Package adopt gives Catena a record for every attachment that the node's
// primary CNI made before Catena wrapped it, so that the runtime's later DEL,
// which then reaches Catena, still tears it down.
//
// The source is the runtime's libcni cache: after every ADD, libcni (and so
// containerd's go-cni) writes <resultsDir>/<network>-<containerID>-<ifname>,
// holding the conflist used, the runtime's arguments and the final result.
package adopt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain"
)

// DefaultResultsDir is where libcni keeps its cache by default.
const DefaultResultsDir = "/var/lib/cni/results"

// Options says what to adopt and where to record it.
type Options struct {
	// ResultsDir is libcni's cache dir of results; default DefaultResultsDir.
	ResultsDir string
	// CacheDir is Catena's cacheDir, where the records are written.
	CacheDir string
	// ConfList is the primary's conflist (a .conf already converted to a
	// list); only the entries of its network are adopted.
	ConfList []byte
	// Logger gets one line per adopted attachment; default slog.Default().
	Logger *slog.Logger
	// FS is where the libcni cache is read; default the OS filesystem.
	FS afero.Fs
	// Store receives the records; default a DiskStore on CacheDir locked
	// by a FlockLocker on CacheDir/locks, as the catena plugin builds it.
	Store cache.Store
	// LockTimeout bounds the wait for one attachment's lock; default
	// Catena's own default lockTimeout.
	LockTimeout time.Duration
}

// Report says what Adopt did.
type Report struct {
	// Adopted counts the records written.
	Adopted int
	// AlreadyPresent counts the attachments that had a record already,
	// which Adopt left alone.
	AlreadyPresent int
	// Skipped names each cache file not adopted, with the reason.
	Skipped []string
}

// adopter carries one Adopt call.
type adopter struct {
	opts    Options
	network string
	log     *slog.Logger
	rep     Report
}

// Adopt writes a complete Catena record for every attachment of the primary's
// network found in the libcni cache that has none yet. A cache file that
// cannot be adopted is skipped with its reason; an error means the store
// could not be read or written, and the caller must not install Catena's
// conflist, as the attachments not yet recorded would leak on DEL.
func Adopt(ctx context.Context, opts Options) (Report, error) {
	a, err := newAdopter(opts)
	if err != nil {
		return Report{}, err
	}
	cands, skipped, err := listCandidates(a.opts.FS, a.opts.ResultsDir, a.network)
	if err != nil {
		return Report{}, fmt.Errorf("adopt network %q: %w", a.network, err)
	}
	for _, s := range skipped {
		a.log.Debug("libcni cache entry not adopted", "reason", s)
	}
	a.rep.Skipped = skipped
	for _, c := range cands {
		if err := a.adoptOne(ctx, c); err != nil {
			return a.rep, fmt.Errorf("adopt network %q: %w", a.network, err)
		}
	}
	return a.rep, nil
}

func newAdopter(opts Options) (*adopter, error) {
	list, err := libcni.NetworkConfFromBytes(opts.ConfList)
	if err != nil {
		return nil, fmt.Errorf("adopt: the primary's conflist: %w", err)
	}
	if err := utils.ValidateNetworkName(list.Name); err != nil {
		return nil, fmt.Errorf("adopt: the primary's network name %q: %w", list.Name, err)
	}
	if opts.ResultsDir == "" {
		opts.ResultsDir = DefaultResultsDir
	}
	if opts.FS == nil {
		opts.FS = afero.NewOsFs()
	}
	if opts.Store == nil {
		if !filepath.IsAbs(opts.CacheDir) {
			return nil, fmt.Errorf("adopt network %q: catena's cache dir %q is not an absolute path", list.Name, opts.CacheDir)
		}
		opts.Store = cache.NewDiskStore(afero.NewOsFs(), opts.CacheDir,
			cache.NewFlockLocker(filepath.Join(opts.CacheDir, cache.LocksDir)))
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = libchain.DefaultLockTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &adopter{opts: opts, network: list.Name, log: log}, nil
}

func (a *adopter) skip(name string, why error) {
	a.rep.Skipped = append(a.rep.Skipped, name+": "+why.Error())
	level := slog.LevelWarn
	if errors.Is(why, errCatenaOwn) {
		level = slog.LevelDebug
	}
	a.log.Log(context.Background(), level, "libcni cache entry not adopted", "file", name, "reason", why.Error())
}

// adoptOne records one cache file's attachment under its lock. Only a store
// failure is returned; anything wrong with the file is a skip.
func (a *adopter) adoptOne(ctx context.Context, c candidate) error {
	path := filepath.Join(a.opts.ResultsDir, c.name)
	e, err := readEntry(a.opts.FS, path, c, a.network)
	if err != nil {
		a.skip(c.name, err)
		return nil
	}
	rec, err := buildRecord(e)
	if err != nil {
		a.skip(c.name, err)
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, a.opts.LockTimeout)
	defer cancel()
	lock, err := a.opts.Store.Lock(lctx, rec.Key, cache.Holder{PID: os.Getpid(), Verb: "ADOPT", Since: time.Now()})
	if err != nil {
		return fmt.Errorf("attachment %s: %w", rec.Key, err)
	}
	defer func() { _ = lock.Unlock() }()
	switch _, err := a.opts.Store.Load(rec.Key); {
	case err == nil:
		a.rep.AlreadyPresent++
		return nil
	case errors.Is(err, cache.ErrCorrupt):
		a.skip(c.name, fmt.Errorf("catena's record is corrupt, left to catena's own recovery: %w", err))
		return nil
	case !errors.Is(err, cache.ErrNotFound):
		return fmt.Errorf("attachment %s: reading catena's record: %w", rec.Key, err)
	}
	if err := a.opts.Store.Save(rec); err != nil {
		return fmt.Errorf("attachment %s: saving the adopted record: %w", rec.Key, err)
	}
	return a.confirm(c.name, path, rec)
}

// confirm keeps the saved record only if libcni's cache file is still there:
// a DEL through the primary that ran meanwhile removed it, and its
// attachment no longer exists.
func (a *adopter) confirm(name, path string, rec *cache.Record) error {
	switch _, err := a.opts.FS.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
		if err := a.opts.Store.Remove(rec.Key); err != nil {
			return fmt.Errorf("attachment %s: removing the record of an attachment deleted during adoption: %w", rec.Key, err)
		}
		a.skip(name, errors.New("deleted by the runtime during adoption"))
		return nil
	case err != nil:
		// Keeping the record is the safe side: at worst a later DEL
		// repeats DELs that the spec requires to succeed.
		a.log.Warn("cannot confirm the libcni cache entry after adopting it; keeping the record",
			"attachment", rec.Key.String(), "source", path, "error", err)
	}
	a.rep.Adopted++
	a.log.Info("adopted attachment", "attachment", rec.Key.String(), "delegates", stepTypes(rec), "source", path)
	return nil
}

func stepTypes(rec *cache.Record) []string {
	out := make([]string, len(rec.Steps))
	for i, s := range rec.Steps {
		out[i] = s.Type
	}
	return out
}
