//go:build linux

package libchain

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
)

// RetrierArg is the argument with which catena runs as a detached retrier
// (ProcKicker); a runtime never passes arguments to a plugin.
const RetrierArg = "--retry-pending"

// The retrier's inherited fds: its lock, and its network config.
const (
	retrierLockFd  = 3
	retrierConfFd  = 4
	maxRetrierConf = 16 << 20
)

// ProcKicker starts a retry pass as a detached process of the executable
// Self (default /proc/self/exe, which still runs this binary if it was
// replaced meanwhile), run with RetrierArg:
//   - it takes the cache dir's retrier lock here, without waiting; if it is
//     held (another retrier, or catena-agent) nothing is started;
//   - the child inherits the locked file as fd 3, so the lock is held
//     without a gap until it exits, and the network config as fd 4 (a
//     memfd); it makes both close-on-exec at once (RetrierInherited), so
//     that no delegate it runs holds them;
//   - stdin, stdout and stderr are /dev/null and every other fd this
//     process has is close-on-exec first, so the child holds no pipe of the
//     runtime's (containerd and kubelet wait for the plugin's stdout to
//     close), and it runs in its own session, not the runtime's process
//     group. It logs to the config's logFile, if any, and its operations
//     go to the event journal as every other's.
type ProcKicker struct {
	CacheDir string
	// Config is the network config as the runtime passed it.
	Config []byte
	Self   string
}

var _ RetryKicker = (*ProcKicker)(nil)

// Kick implements RetryKicker.
func (k *ProcKicker) Kick(req Request) error {
	lock, err := cache.TryRetrierLock(k.CacheDir)
	if errors.Is(err, cache.ErrLocked) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }()
	conf, err := memfdWith("catena-retrier-config", k.Config)
	if err != nil {
		return fmt.Errorf("starting the retrier: %w", err)
	}
	defer func() { _ = conf.Close() }()
	self := k.Self
	if self == "" {
		self = "/proc/self/exe"
	}
	cmd := exec.Command(self, RetrierArg)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "CNI_PATH="+req.Args.Path)
	cmd.ExtraFiles = []*os.File{lock.File(), conf}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Whatever fds the runtime let this process inherit stay here.
	_ = unix.CloseRange(retrierConfFd+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the retrier %s: %w", self, err)
	}
	// Not waited for: it outlives this call; init reaps it.
	return cmd.Process.Release()
}

// memfdWith returns an anonymous file holding data.
func memfdWith(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	return f, nil
}

// RetrierInherited returns what ProcKicker handed a retrier process: the
// raw network config, and a function that takes over the retrier lock once
// the cache dir is known (from the config). First of all it makes every fd
// it inherited past stderr close-on-exec: a delegate the retrier runs, and
// a process the delegate leaves behind, must not hold the lock (held, it
// keeps every later retrier of the cache dir from starting).
func RetrierInherited() (config []byte, lockOf func(cacheDir string) (*cache.RetrierLock, error), err error) {
	if err := inheritedCloseOnExec(); err != nil {
		return nil, nil, err
	}
	conf := os.NewFile(retrierConfFd, "retrier config")
	if conf == nil {
		return nil, nil, errors.New("retrier: no config fd")
	}
	defer func() { _ = conf.Close() }()
	config, err = io.ReadAll(io.NewSectionReader(conf, 0, maxRetrierConf+1))
	if err != nil {
		return nil, nil, fmt.Errorf("retrier: reading the config: %w", err)
	}
	if len(config) > maxRetrierConf {
		return nil, nil, fmt.Errorf("retrier: config over %d bytes", maxRetrierConf)
	}
	lockOf = func(cacheDir string) (*cache.RetrierLock, error) {
		return cache.InheritedRetrierLock(os.NewFile(retrierLockFd, filepath.Join(cacheDir, cache.RetrierLockName)))
	}
	return config, lockOf, nil
}

// inheritedCloseOnExec makes the retrier's lock and config fds, and any
// other fd past stderr, close-on-exec.
func inheritedCloseOnExec() error {
	for _, fd := range []int{retrierLockFd, retrierConfFd} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
			return fmt.Errorf("retrier: making fd %d close-on-exec: %w", fd, err)
		}
	}
	// ProcKicker hands down nothing else; close_range needs Linux 5.11.
	_ = unix.CloseRange(retrierConfFd+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	return nil
}
