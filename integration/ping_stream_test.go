package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
)

// pingStream is one pod pinging another: an ICMP socket opened inside the
// first pod's netns sends an echo request every interval to the second's
// address and waits up to a second for each reply (echo, ping_test.go).
type pingStream struct {
	sent, lost int
	// longest is the longest run of consecutive losses.
	longest int
}

func (s pingStream) String() string {
	return fmt.Sprintf("%d pings, %d lost (longest run %d)", s.sent, s.lost, s.longest)
}

// startPingStream pings dst from inside the netns at nsPath until the
// returned stop is called, which returns the counts.
func startPingStream(t *testing.T, nsPath, dst string, interval time.Duration) (stop func() pingStream) {
	t.Helper()
	c := listenICMPIn(t, nsPath)
	ip := net.ParseIP(dst)
	require.NotNil(t, ip, dst)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var s pingStream
	wg.Add(1)
	go func() {
		defer wg.Done()
		id, run := (os.Getpid()+1)&0xffff, 0
		buf := make([]byte, 1500)
		for seq := 1; ; seq++ {
			select {
			case <-done:
				return
			default:
			}
			sentAt := time.Now()
			s.sent++
			if echo(c, ip, id, seq&0xffff, []byte("catena-stream"), time.Second, buf) != nil {
				s.lost++
				run++
				s.longest = max(s.longest, run)
			} else {
				run = 0
			}
			time.Sleep(time.Until(sentAt.Add(interval)))
		}
	}()
	var once sync.Once
	return func() pingStream {
		once.Do(func() {
			close(done)
			wg.Wait()
			_ = c.Close()
		})
		return s
	}
}

// listenICMPIn opens a raw ICMP socket inside the netns at nsPath (a
// socket stays in the netns it was made in), on a locked thread put back
// in the host's netns after.
func listenICMPIn(t *testing.T, nsPath string) *icmp.PacketConn {
	t.Helper()
	runtime.LockOSThread()
	host, err := netns.Get()
	require.NoError(t, err)
	defer func() { _ = host.Close() }()
	target, err := netns.GetFromPath(nsPath)
	require.NoError(t, err)
	defer func() { _ = target.Close() }()
	require.NoError(t, netns.Set(target))
	c, lerr := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
	if err := netns.Set(host); err != nil {
		// The thread stays locked, in the wrong netns: Go ends it with
		// its goroutine.
		require.NoError(t, err, "back to the host's netns")
	}
	runtime.UnlockOSThread()
	require.NoError(t, lerr)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// podNetns finds the netns, among the runtime's in dir, whose interfaces
// hold ip.
func podNetns(t *testing.T, dir, ip string) string {
	t.Helper()
	want := net.ParseIP(ip)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		ns, err := netns.GetFromPath(path)
		if err != nil {
			continue
		}
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			_ = ns.Close()
			continue
		}
		addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
		h.Close()
		_ = ns.Close()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if a.IP.Equal(want) {
				return path
			}
		}
	}
	t.Fatalf("no netns in %s holds %s", dir, ip)
	return ""
}
