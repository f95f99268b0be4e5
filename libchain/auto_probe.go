package libchain

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/invoke"
)

// VersionAsker is what CachedProber needs of an executor: to find a
// delegate's binary in CNI_PATH, and to ask it VERSION. invoke.Exec is one.
type VersionAsker interface {
	// Find returns the absolute path of the delegate typ in cniPath, or a
	// CNI error saying why there is none.
	Find(typ, cniPath string) (string, error)
	// Version runs the binary's VERSION as any delegate call runs.
	Version(ctx context.Context, binary string) (version.PluginInfo, error)
}

var _ VersionAsker = (*invoke.Exec)(nil)

// CachedProber is the VersionProber of a real node: it runs a delegate's
// VERSION as any delegate call runs (the executor's process group, bounded
// output, the caller's deadline) and keeps usable answers in a
// cache.VersionCache, keyed by the binary's identity (path, device, inode,
// size, mtime), so that a binary is asked once, not once per CNI call.
type CachedProber struct {
	Exec VersionAsker
	// Cache keeps the answers across calls; nil asks every time.
	Cache *cache.VersionCache
	// Stat stats a binary, following a symlink to what runs; nil: os.Stat.
	Stat func(string) (os.FileInfo, error)
	// Log receives what cannot be cached; nil discards it.
	Log *slog.Logger
}

var _ VersionProber = (*CachedProber)(nil)

// NewCachedProber returns the prober of exec with the version cache of
// cacheDir on fsys.
func NewCachedProber(exec VersionAsker, fsys afero.Fs, cacheDir string, log *slog.Logger) *CachedProber {
	return &CachedProber{Exec: exec, Cache: cache.NewVersionCache(fsys, cacheDir), Log: log}
}

func (p *CachedProber) stat(path string) (os.FileInfo, error) {
	if p.Stat != nil {
		return p.Stat(path)
	}
	return os.Stat(path)
}

func (p *CachedProber) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Probe implements VersionProber.
func (p *CachedProber) Probe(ctx context.Context, typ, cniPath string) (Probed, error) {
	bin, err := p.Exec.Find(typ, cniPath)
	if err != nil {
		return Probed{}, err
	}
	fi, err := p.stat(bin)
	if err != nil {
		return Probed{Binary: bin}, types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("plugin %q: %v", typ, err), "")
	}
	id := cache.BinaryIDOf(bin, fi)
	if p.Cache != nil {
		got, ok, err := p.Cache.Get(id)
		if err != nil {
			p.log().Warn("ignoring the cached VERSION answer; asking again", "binary", bin, "error", err)
		}
		if ok {
			return Probed{Binary: bin, Supported: got, Cached: true}, nil
		}
	}
	info, err := p.Exec.Version(ctx, bin)
	if err != nil {
		return Probed{Binary: bin}, fmt.Errorf("%s: %w", bin, err)
	}
	got := Probed{Binary: bin, Supported: info.SupportedVersions()}
	p.keep(id, got.Supported)
	return got, nil
}

// keep caches a usable answer, and only if the binary is still the one
// that gave it: one replaced while it answered is asked again next time.
func (p *CachedProber) keep(id cache.BinaryID, supported []string) {
	if p.Cache == nil {
		return
	}
	if _, err := Negotiate(supported); err != nil {
		return // the caller reports it; nothing worth keeping
	}
	fi, err := p.stat(id.Path)
	if err != nil || cache.BinaryIDOf(id.Path, fi) != id {
		p.log().Info("not caching the VERSION answer of a binary that changed while it answered", "binary", id.Path)
		return
	}
	if err := p.Cache.Put(id, supported); err != nil {
		p.log().Warn("caching a VERSION answer", "binary", id.Path, "error", err)
	}
}

// Forget implements VersionProber.
func (p *CachedProber) Forget(binary string) error {
	if p.Cache == nil {
		return nil
	}
	return p.Cache.Forget(binary)
}
