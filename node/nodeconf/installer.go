package nodeconf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// Config says where Catena is installed and with which options.
type Config struct {
	// ConfDir is the runtime's CNI conf dir.
	ConfDir string
	// ConfName is the generated file's name; it must sort before the
	// primary's and end in .conflist.
	ConfName string
	// Primary pins the primary's file name; "" or "auto" chooses it as the
	// runtime would, once, and then keeps it.
	Primary string
	// BinDir is the CNI bin dir Catena's binaries are copied into; "" skips
	// the copy.
	BinDir string
	// SourceDir holds the binaries to copy.
	SourceDir string
	// Catena are Catena's own options in the generated file.
	Catena CatenaOptions
	// NetworkDir says whether the runtime reads the primary's network dir
	// (netdir.go); "" is load.
	NetworkDir NetworkDirMode
	// PluginDirs are the runtime's CNI bin dirs: a primary naming a plugin
	// in none of them is not wrapped (plugins.go). Empty: not checked.
	PluginDirs []string
	// RewriteBackoff is the longest wait before the generated file is
	// written again while another writer keeps taking it away (Cilium's
	// exclusive mode; rewrite_backoff.go); 0 is DefaultRewriteBackoff.
	RewriteBackoff time.Duration
}

// Validate checks the names before anything is read or written.
func (c Config) Validate() error {
	if c.RewriteBackoff != 0 && c.RewriteBackoff < contestMin {
		return fmt.Errorf("rewrite backoff %s: at least %s (0: %s)", c.RewriteBackoff, contestMin, DefaultRewriteBackoff)
	}
	switch {
	case c.ConfDir == "":
		return errors.New("the CNI conf dir is empty")
	case c.ConfName != filepath.Base(c.ConfName) || strings.HasPrefix(c.ConfName, "."):
		return fmt.Errorf("conf name %q: must be a plain, visible file name", c.ConfName)
	case filepath.Ext(c.ConfName) != ".conflist":
		return fmt.Errorf("conf name %q: must end in .conflist (it is a list)", c.ConfName)
	case c.Primary != "" && c.Primary != "auto" && c.Primary == c.ConfName:
		return fmt.Errorf("primary %q is the generated file's own name", c.Primary)
	case c.BinDir != "" && c.SourceDir == "":
		return errors.New("a CNI bin dir needs a source dir of binaries")
	}
	if err := c.NetworkDir.Validate(); err != nil {
		return err
	}
	return c.Catena.DelegateVersions.Validate()
}

// Adopter gives a record to each attachment the primary made that Catena
// has none of (see package node/adopt). It runs before every write of the
// generated file, and on every pass once the file is in place
// (adoptpass.go).
type Adopter func(ctx context.Context, p *Primary) error

// Status is the outcome of the last Sync.
type Status struct {
	// Ready: the generated file is in place, wraps the current primary and
	// is the file the runtime loads first.
	Ready bool
	// Reason says why not.
	Reason string
	// Primary is the primary's file name, once chosen.
	Primary string
	// NetworkDir is the primary's network dir the runtime reads, once the
	// primary is loaded; "" if it reads none.
	NetworkDir string
	// Wrote: this Sync (re)wrote the generated file.
	Wrote bool
	// Copied names the binaries this Sync copied.
	Copied []string
	// Generated is the sha256 of the generated file this Sync left in
	// place (written or found); zero if it left none.
	Generated [sha256.Size]byte
	// At is when the Sync ended.
	At time.Time
}

// Installer keeps Catena's generated conflist and binaries in place.
type Installer struct {
	Fs    afero.Fs
	Cfg   Config
	Adopt Adopter // nil: nothing to adopt
	Log   *slog.Logger
	Now   func() time.Time // default time.Now
	// Interlock, if set, is held while anything is written (interlock.go).
	Interlock *DirLock
	// Observer, if set, is told of the generated file's writes and of
	// another writer taking it away (rewrite_backoff.go).
	Observer ConflistObserver
	// Leaving, if set, is asked as Watch ends whether the agent leaves the
	// node for good (its DaemonSet deleted), and why: true removes the
	// generated conflist (leave.go).
	Leaving func() (bool, string)

	node nodeState // watch.go's and stale.go's

	mu     sync.Mutex // one Sync at a time
	pinned string
	noted  map[string]bool // earlier-sorting files already logged

	statusMu sync.Mutex // separate, so health checks never wait for a Sync
	status   Status
}

// Status returns the outcome of the last Sync.
func (i *Installer) Status() Status {
	i.statusMu.Lock()
	defer i.statusMu.Unlock()
	return i.status
}

// Sync does one pass: it reads and wraps the primary, then (only if that
// worked) installs the binaries, adopts and writes the generated file. On
// error the generated file is left as it was (the last good one, or none),
// and the status says why it is not ready.
func (i *Installer) Sync(ctx context.Context) (Status, error) {
	return i.syncHeld(ctx, nil)
}

// syncHeld is Sync, except that a generated file that needs writing is not
// written while hold is not nil: the pass fails with hold as its reason
// (Watch's backoff against another writer, rewrite_backoff.go).
func (i *Installer) syncHeld(ctx context.Context, hold error) (Status, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	st, err := i.sync(ctx, hold)
	if err != nil {
		st.Ready, st.Reason = false, err.Error()
	}
	if i.Now == nil {
		i.Now = time.Now
	}
	st.At = i.Now()
	i.statusMu.Lock()
	i.status = st
	i.statusMu.Unlock()
	return st, err
}

func (i *Installer) sync(ctx context.Context, hold error) (Status, error) {
	var st Status
	if err := i.Cfg.Validate(); err != nil {
		return st, err
	}
	if err := i.holdConfDir(); err != nil {
		return st, err
	}
	files, err := ConfFiles(i.Fs, i.Cfg.ConfDir)
	if err != nil {
		return st, err
	}
	if st.Primary, err = i.choose(files); err != nil {
		return st, err
	}
	p, err := LoadPrimary(i.Fs, i.Cfg.ConfDir, st.Primary, i.Cfg.NetworkDir)
	if err != nil {
		return st, fmt.Errorf("%w; nothing written", err)
	}
	st.NetworkDir = p.NetworkDir
	out, err := Wrap(p, i.Cfg.Catena)
	if err != nil {
		return st, fmt.Errorf("%w; nothing written", err)
	}
	if err := i.checkPlugins(p); err != nil {
		return st, fmt.Errorf("%w; nothing written, %s stays as it was", err, i.Cfg.ConfName)
	}
	// Only now that the primary is known to be usable is anything written;
	// the binaries first, so the config never names a missing catena.
	if i.Cfg.BinDir != "" {
		copied, err := i.InstallBinaries(i.Cfg.SourceDir, i.Cfg.BinDir, Binaries)
		st.Copied = copied
		if err != nil {
			return st, err
		}
		if len(copied) > 0 {
			i.Log.Info("installed binaries", "binDir", i.Cfg.BinDir, "copied", copied)
		}
	}
	path := filepath.Join(i.Cfg.ConfDir, i.Cfg.ConfName)
	perm, err := i.confMode(path, p)
	if err != nil {
		return st, err
	}
	same, err := sameContent(i.Fs, path, bytes.NewReader(out), int64(len(out)), perm)
	if err != nil {
		return st, err
	}
	if !same && hold != nil {
		return st, hold
	}
	if !same {
		if i.Adopt != nil {
			if err := i.Adopt(ctx, p); err != nil {
				return st, fmt.Errorf("adopting the attachments of network %q before wrapping %s: %w", p.List.Name, p.File, err)
			}
		}
		if st.Wrote, err = writeIfChanged(i.Fs, path, out, perm); err != nil {
			return st, writeError(path, p.File, err)
		}
		i.Log.Info("wrote the generated conflist", "file", path, "primary", p.File, "sha256", p.SHA256, "network", p.List.Name,
			"networkDirPlugins", len(p.DirPlugins))
		if i.Observer != nil {
			i.Observer.ConflistWritten()
		}
	}
	st.Generated = sha256.Sum256(out)
	i.pinned = st.Primary
	if files, err = i.inPlace(ctx, p, files); err != nil {
		return st, err
	}
	if before := shadowing(files, i.Cfg.ConfName); len(before) > 0 {
		return st, fmt.Errorf("%s sorts before %s: the runtime loads it instead of catena's file (choose a --conf-name that sorts first)", strings.Join(before, ", "), i.Cfg.ConfName)
	}
	st.Ready = true
	return st, nil
}

// writeError is the error of a failed write of the generated file at path,
// wrapping primary: it says what to do when the conf dir is read-only or
// not the agent's to write.
func writeError(path, primary string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
		return fmt.Errorf("cannot write %s (wrapping %s): %w; %s is left as it was, and does not follow %s until catena-agent can write the conf dir %s: "+
			"mount it read-write (the DaemonSet's hostPath), and run catena-agent as root or the dir's owner",
			path, primary, err, filepath.Base(path), primary, filepath.Dir(path))
	}
	return fmt.Errorf("writing %s (wrapping %s): %w; %s is left as it was", path, primary, err, filepath.Base(path))
}
