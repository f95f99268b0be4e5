package libchain

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/cache"
)

// requireNetNSRoot skips a test that enters or unshares a network
// namespace when not root, and fails it instead under CI=true.
func requireNetNSRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to enter or unshare a netns (CI=true: it must run, not skip)")
		}
		t.Skip("needs root to enter or unshare a netns")
	}
}

// privateNetNS runs fn on a thread of its own inside a new, unnamed network
// namespace; fn gets the path of that namespace's nsfs file. The thread is
// never unlocked, so Go ends it (and the namespace with it) afterwards:
// nothing is left on the host.
func privateNetNS(t *testing.T, fn func(path string) error) {
	t.Helper()
	requireNetNSRoot(t)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		done <- fn(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	}()
	require.NoError(t, <-done)
}

// TestStatNetNSRealKernel: the identity of a namespace is stable, tells a
// different namespace apart by its never-reused ID, and the netns-cookie
// fallback (for kernels before NS_GET_ID) reads the cookie of the namespace
// at the path, not of the caller's.
func TestStatNetNSRealKernel(t *testing.T) {
	requireNetNSRoot(t) // fileCookie enters the namespace
	host, err := StatNetNS("/proc/self/ns/net")
	require.NoError(t, err)
	again, err := StatNetNS("/proc/self/ns/net")
	require.NoError(t, err)
	assert.Equal(t, host, again)
	assert.NotZero(t, host.ID, "this kernel gives namespaces a never-reused ID")

	hostCookie, err := fileCookie("/proc/self/ns/net")
	require.NoError(t, err)
	var private cache.NetNSIdentity
	var privateCookie, directCookie uint64
	privateNetNS(t, func(path string) error {
		var err error
		if private, err = StatNetNS(path); err != nil {
			return err
		}
		if privateCookie, err = fileCookie(path); err != nil {
			return err
		}
		sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer func() { _ = unix.Close(sock) }()
		directCookie, err = unix.GetsockoptUint64(sock, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		return err
	})
	assert.NotEqual(t, host.ID, private.ID)
	assert.NotEqual(t, host, private)
	assert.NotZero(t, privateCookie)
	assert.Equal(t, directCookie, privateCookie, "the cookie is that of the namespace at the path")
	assert.NotEqual(t, hostCookie, privateCookie)

	_, err = StatNetNS("/var/run/netns/catena-no-such-netns")
	require.ErrorIs(t, err, os.ErrNotExist)
	plain := t.TempDir() + "/plain"
	require.NoError(t, os.WriteFile(plain, nil, 0o600))
	id, err := StatNetNS(plain)
	require.NoError(t, err)
	assert.Zero(t, id.ID, "a plain file has no namespace ID")
	assert.NotEqual(t, host.Dev, id.Dev)
}

func fileCookie(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	return netnsCookie(f)
}

// TestStatNetNSReadersFail: where neither NS_GET_ID nor SO_NETNS_COOKIE
// can be read, the identity keeps the inode and an unknown ID (0); with
// only the ioctl failing, the cookie stands in. A record made while both
// could be read, compared with the namespace read now without an ID, is
// doubt: a runtime's DEL keeps its netns, a teardown nobody asked for
// passes none, and nothing calls it another namespace.
func TestStatNetNSReadersFail(t *testing.T) {
	requireNetNSRoot(t) // the cookie enters the namespace
	const path = "/proc/self/ns/net"
	fail := func(*os.File) (uint64, error) { return 0, unix.ENOPROTOOPT }
	full, err := StatNetNS(path)
	require.NoError(t, err)
	require.NotZero(t, full.ID)

	none, err := NetNSStat{NSID: fail, Cookie: fail}.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, cache.NetNSIdentity{Dev: full.Dev, Ino: full.Ino}, none)
	cookieOnly, err := NetNSStat{NSID: fail}.Stat(path)
	require.NoError(t, err)
	assert.NotZero(t, cookieOnly.ID, "the cookie stands in for NS_GET_ID")
	assert.Equal(t, NetNSDoubt, CompareNetNS(full, none))
	assert.Equal(t, NetNSDoubt, CompareNetNS(none, full))

	eng := &Engine{StatNetNS: NetNSStat{NSID: fail, Cookie: fail}.Stat}
	rec := &cache.Record{Key: cache.Key{Network: "podnet", ContainerID: "c1", IfName: "eth0"}, NetNS: path, NetNSID: &full}
	state, why := eng.netnsState(rec)
	assert.Equal(t, nsSameInode, state, why)
	ctx, trace := eng.begin(t.Context(), "TEST", rec.Key)
	assert.Equal(t, path, eng.teardownNetNS(ctx, rec, path, byRuntime))
	assert.Empty(t, eng.teardownNetNS(ctx, rec, path, byNobody))
	assert.Empty(t, trace.op.NetNSReplaced)
}
