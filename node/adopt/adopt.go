package adopt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/libcnientry"
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
	// list); only the entries of its network are adopted. Only Adopt reads
	// it: an Adopter is given the conflist on each pass.
	ConfList []byte
	// NetworkDirPlugins are the plugin configs the runtime appends to
	// ConfList's from the network dir (<conf dir>/<network>/*.conf, libcni
	// v1.3), in order. libcni caches the file's list without them, but
	// ran them, and the runtime's DEL through the primary would run them
	// again: an entry whose cached list does not set
	// loadOnlyInlinedPlugins gets them as its last steps. Only Adopt reads
	// it, like ConfList.
	NetworkDirPlugins [][]byte
	// Logger gets one line per adopted attachment; default slog.Default().
	Logger *slog.Logger
	// FS is where the libcni cache is read; default the OS filesystem,
	// read under the cache dir's trust rules (see Adopter).
	FS afero.Fs
	// Store receives the records; default a DiskStore on CacheDir locked
	// by a FlockLocker on CacheDir/locks, as the catena plugin builds it.
	Store cache.Store
	// LockTimeout bounds the wait for one attachment's lock; default
	// Catena's own default lockTimeout.
	LockTimeout time.Duration
}

// Report says what one pass did with the entries it had not settled
// before; an entry settled by an earlier pass of the same Adopter is not
// counted again.
type Report struct {
	// Adopted counts the records written.
	Adopted int
	// AlreadyPresent counts the attachments that had a record already,
	// which Adopt left alone.
	AlreadyPresent int
	// Skipped names each cache file not adopted, with the reason.
	Skipped []string
	// Refused names each cache file not adopted because another user
	// than Catena's could have written it, with the reason.
	Refused []string
}

// Adopter adopts the primary's attachments on every pass of the agent. It
// settles each entry of the results dir once: adopted, found with a record,
// skipped or refused, and then passes over it while its inode, size, mtime
// and ctime stay the same, so a pass costs a listing of the dir plus the
// entries that are new or changed. An entry is never adopted twice: a
// record that a DEL through Catena removed is not brought back from the
// libcni entry that libcni removes right after. A DEL that adopted the
// entry itself (libcnientry.AtDel) removes it under the attachment's lock,
// so that a pass that read it before finds it gone once it has the lock,
// and drops the record it wrote (confirm).
//
// Trust: on the real disk the results dir is read as Catena reads its own
// cache dir (fileutil.TrustedFs): the dir must be owned by Catena's euid and
// not writable by group or others, and is never reached through a symlink
// (an untrusted dir fails the pass: nothing in it is adopted); each entry
// must be a regular file of Catena's euid, not writable by group or others,
// opened with O_NOFOLLOW (an untrusted entry is refused, logged and
// reported, and the pass goes on).
type Adopter struct {
	opts Options
	fs   afero.Fs

	mu      sync.Mutex // one pass at a time
	network string     // whose entries settled holds
	settled map[string]libcnientry.FileID
}

// New returns an Adopter; opts.ConfList is not used.
func New(opts Options) (*Adopter, error) {
	if opts.ResultsDir == "" {
		opts.ResultsDir = DefaultResultsDir
	}
	if opts.FS == nil {
		opts.FS = afero.NewOsFs()
	}
	if opts.Store == nil {
		if !filepath.IsAbs(opts.CacheDir) {
			return nil, fmt.Errorf("adopt: catena's cache dir %q is not an absolute path", opts.CacheDir)
		}
		opts.Store = cache.NewDiskStore(afero.NewOsFs(), opts.CacheDir,
			cache.NewFlockLocker(filepath.Join(opts.CacheDir, cache.LocksDir)))
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = libchain.DefaultLockTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.ResultsDir = filepath.Clean(opts.ResultsDir)
	return &Adopter{opts: opts, fs: fileutil.TrustedFs(opts.FS, opts.ResultsDir)}, nil
}

// Adopt is one pass of a new Adopter on opts.ConfList's network.
func Adopt(ctx context.Context, opts Options) (Report, error) {
	if _, err := networkOf(opts.ConfList); err != nil {
		return Report{}, err
	}
	a, err := New(opts)
	if err != nil {
		return Report{}, err
	}
	return a.AdoptWithDir(ctx, opts.ConfList, opts.NetworkDirPlugins)
}

// networkOf returns the network name of the primary's conflist.
func networkOf(confList []byte) (string, error) {
	list, err := libcni.NetworkConfFromBytes(confList)
	if err != nil {
		return "", fmt.Errorf("adopt: the primary's conflist: %w", err)
	}
	if err := utils.ValidateNetworkName(list.Name); err != nil {
		return "", fmt.Errorf("adopt: the primary's network name %q: %w", list.Name, err)
	}
	return list.Name, nil
}

// Adopt writes a complete Catena record for every attachment of the
// network of confList (the primary's conflist) found in the libcni cache
// that has none yet and that no earlier pass settled. A cache file that
// cannot be adopted is skipped or refused with its reason; an error means
// the results dir or the store could not be read or written, and the
// caller must not install Catena's conflist (or, if it is in place, must
// report it not ready), as the attachments not yet recorded would leak on
// DEL.
func (a *Adopter) Adopt(ctx context.Context, confList []byte) (Report, error) {
	return a.AdoptWithDir(ctx, confList, nil)
}

// AdoptWithDir is Adopt of a primary whose network dir's plugins the
// runtime runs after confList's (Options.NetworkDirPlugins).
func (a *Adopter) AdoptWithDir(ctx context.Context, confList []byte, dirPlugins [][]byte) (Report, error) {
	network, err := networkOf(confList)
	if err != nil {
		return Report{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if network != a.network || a.settled == nil {
		a.network, a.settled = network, map[string]libcnientry.FileID{}
	}
	p := &pass{Adopter: a, dirPlugins: dirPlugins}
	cands, err := p.scan()
	if err != nil {
		return p.rep, fmt.Errorf("adopt network %q: %w", network, err)
	}
	for _, c := range cands {
		if err := p.adoptOne(ctx, c); err != nil {
			return p.rep, fmt.Errorf("adopt network %q: %w", network, err)
		}
	}
	return p.rep, nil
}

// pass carries one Adopt call.
type pass struct {
	*Adopter
	dirPlugins [][]byte
	rep        Report
}

func (p *pass) settle(name string, id libcnientry.FileID) { p.settled[name] = id }

// skip reports a file not adopted; quiet ones (other networks) are logged
// at debug level only.
func (p *pass) skip(name string, why error, quiet bool) {
	p.rep.Skipped = append(p.rep.Skipped, name+": "+why.Error())
	level := slog.LevelWarn
	if quiet || errors.Is(why, libcnientry.ErrCatenaOwn) {
		level = slog.LevelDebug
	}
	p.opts.Logger.Log(context.Background(), level, "libcni cache entry not adopted", "file", name, "reason", why.Error())
}

// refuse reports a file not adopted because it is not trusted.
func (p *pass) refuse(name string, why error) {
	p.rep.Refused = append(p.rep.Refused, name+": "+why.Error())
	p.opts.Logger.Warn("libcni cache entry refused: another user could have written it",
		"file", filepath.Join(p.opts.ResultsDir, name), "reason", why.Error())
}

// adoptOne records one cache file's attachment under its lock. Only a store
// failure is returned; anything wrong with the file is a skip or refusal.
func (p *pass) adoptOne(ctx context.Context, c candidate) error {
	path := filepath.Join(p.opts.ResultsDir, c.name)
	data, id, err := libcnientry.Read(p.fs, path)
	switch {
	case errors.Is(err, fileutil.ErrUntrusted):
		p.settle(c.name, id)
		p.refuse(c.name, err)
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil // deleted since the listing: nothing to adopt
	case err != nil:
		p.skip(c.name, err, false) // not settled: tried again next pass
		return nil
	}
	rec, err := libcnientry.Record(c.name, data, c.info.ModTime(), p.network, p.dirPlugins)
	if err == nil {
		return p.record(ctx, c.name, path, id, rec)
	}
	p.settle(c.name, id)
	p.skip(c.name, err, false)
	return nil
}

// record saves rec unless the attachment has a record already.
func (p *pass) record(ctx context.Context, name, path string, id libcnientry.FileID, rec *cache.Record) error {
	lctx, cancel := context.WithTimeout(ctx, p.opts.LockTimeout)
	defer cancel()
	lock, err := p.opts.Store.Lock(lctx, rec.Key, cache.Holder{PID: os.Getpid(), Verb: "ADOPT", Since: time.Now()})
	if err != nil {
		return fmt.Errorf("attachment %s: %w", rec.Key, err)
	}
	defer func() { _ = lock.Unlock() }()
	switch _, err := p.opts.Store.Load(rec.Key); {
	case err == nil:
		p.settle(name, id)
		p.rep.AlreadyPresent++
		return nil
	case errors.Is(err, cache.ErrCorrupt):
		// Not settled: looked at again once catena's recovery has run.
		p.skip(name, fmt.Errorf("catena's record is corrupt, left to catena's own recovery: %w", err), false)
		return nil
	case !errors.Is(err, cache.ErrNotFound):
		return fmt.Errorf("attachment %s: reading catena's record: %w", rec.Key, err)
	}
	if err := p.opts.Store.Save(rec); err != nil {
		return fmt.Errorf("attachment %s: saving the adopted record: %w", rec.Key, err)
	}
	if err := p.confirm(name, path, rec); err != nil {
		return err
	}
	p.settle(name, id)
	return nil
}

// confirm keeps the saved record only if libcni's cache file is still there:
// a DEL through the primary that ran meanwhile removed it, and its
// attachment no longer exists.
func (p *pass) confirm(name, path string, rec *cache.Record) error {
	switch _, err := p.fs.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
		if err := p.opts.Store.Remove(rec.Key); err != nil {
			return fmt.Errorf("attachment %s: removing the record of an attachment deleted during adoption: %w", rec.Key, err)
		}
		p.skip(name, errors.New("deleted by the runtime during adoption"), false)
		return nil
	case err != nil:
		// Keeping the record is the safe side: at worst a later DEL
		// repeats DELs that the spec requires to succeed.
		p.opts.Logger.Warn("cannot confirm the libcni cache entry after adopting it; keeping the record",
			"attachment", rec.Key.String(), "source", path, "error", err)
	}
	p.rep.Adopted++
	p.opts.Logger.Info("adopted attachment", "attachment", rec.Key.String(), "delegates", stepTypes(rec), "source", path)
	return nil
}

func stepTypes(rec *cache.Record) []string {
	out := make([]string, len(rec.Steps))
	for i, s := range rec.Steps {
		out[i] = s.Type
	}
	return out
}
