//go:build linux

package cache

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/fileutil"
)

// barrierName is the file of a network's barrier in the FlockLocker's dir
// of that network, locks/<network>/.barrier. It cannot be an attachment's
// lock file, "<key name>.lock" (a key name has a ':' or starts with "h-",
// and ends in ".lock"), nor a network dir (it is one level down). It is
// created 0600 through the checked openat walk, never through a symlink,
// refused if another user owns it or could write it (fileutil/trust.go), and never
// removed: it holds nothing, so there is no unlink race to close.
const barrierName = ".barrier"

var _ Barrier = (*FlockLocker)(nil)

// Barrier implements Barrier with flock(2) on locks/<network>/.barrier:
// LOCK_SH for an ADD, LOCK_EX for a GC, polled without blocking with the
// backoff of Lock until ctx is done. The kernel drops it when its holder
// dies; the fd is close-on-exec, so a delegate never inherits it.
func (l *FlockLocker) Barrier(ctx context.Context, network string, exclusive bool) (Unlocker, error) {
	if err := validNetwork(network); err != nil {
		return nil, fmt.Errorf("network barrier: %w", err)
	}
	dir := networkDirName(network)
	dirfd, err := fileutil.WalkDir(filepath.Dir(l.Dir), filepath.Base(l.Dir)+"/"+dir, true)
	if err != nil {
		return nil, fmt.Errorf("network barrier of %s: %w", network, err)
	}
	lf := &lockFile{dirfd: dirfd, dir: filepath.Join(l.Dir, dir), name: barrierName}
	defer lf.close()
	fd, err := lf.open()
	if err != nil {
		return nil, fmt.Errorf("network barrier of %s: %w", network, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	start := time.Now()
	backoff := lockBackoffMin
	for {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		switch err {
		case nil:
			path := lf.path()
			return onceUnlocker("network barrier "+path, func() error {
				if err := unix.Close(fd); err != nil {
					return fmt.Errorf("unlock network barrier %s: close: %w", path, err)
				}
				return nil
			}), nil
		case unix.EINTR:
			continue
		case unix.EWOULDBLOCK:
		default:
			_ = unix.Close(fd)
			return nil, fmt.Errorf("network barrier of %s: flock %s: %w", network, lf.path(), err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = unix.Close(fd)
			return nil, barrierTimeout(network, exclusive, time.Since(start))
		case <-t.C:
		}
		backoff = min(2*backoff, lockBackoffMax)
	}
}
