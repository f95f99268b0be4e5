package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/node/metrics"
)

// countingListener counts the connections the server holds open.
type countingListener struct {
	net.Listener
	open, peak atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// serve runs a Server on a loopback listener until the test ends.
func serve(t *testing.T, h http.Handler) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cl := &countingListener{Listener: ln}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{Listener: cl, Handler: h, Log: slog.New(slog.DiscardHandler)}).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	return cl
}

func healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	var h Health
	h.Register(mux)
	h.AddLiveness("x", func() error { return nil })
	return mux
}

// dial opens n loopback connections to addr, closed at the end of the test.
func dial(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	return conns
}

// probe is kubelet's: a GET with a 1 s timeout on a fresh connection.
func probe(addr string) error {
	cl := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

func fds(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// TestServerBoundsIdleConnections: 1,000 clients that make one request and
// keep the connection open (keep-alive) are not held for ever, and never
// more than maxConns at once; a probe still gets through meanwhile.
func TestServerBoundsIdleConnections(t *testing.T) {
	t.Parallel()
	cl := serve(t, healthMux())
	addr := cl.Addr().String()
	fd0 := fds(t)
	conns := dial(t, addr, 1000)
	var served atomic.Int64
	for _, c := range conns {
		go func() {
			if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				served.Add(1)
			}
		}()
	}
	time.Sleep(time.Second)
	t.Logf("1 s after 1000 keep-alive clients: %d served, server holds %d conns (peak %d), process fds +%d", served.Load(), cl.open.Load(), cl.peak.Load(), fds(t)-fd0)
	assert.NoError(t, probe(addr), "a probe while they idle")
	start := time.Now()
	closed := assert.Eventually(t, func() bool { return cl.open.Load() == 0 }, 20*time.Second, 100*time.Millisecond, "idle keep-alive connections are closed")
	t.Logf("%s later: %d served, server holds %d conns (peak %d); all closed: %v", time.Since(start).Round(100*time.Millisecond), served.Load(), cl.open.Load(), cl.peak.Load(), closed)
}

// TestServerDropsSlowLoris: 200 clients dribbling a header byte every
// 200 ms are dropped, and a probe gets through meanwhile.
func TestServerDropsSlowLoris(t *testing.T) {
	t.Parallel()
	cl := serve(t, healthMux())
	addr := cl.Addr().String()
	conns := dial(t, addr, 200)
	start := time.Now()
	var dropped atomic.Int64
	var lastDrop atomic.Int64
	req := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 1000) + "\r\n\r\n"
	for _, c := range conns {
		go func() {
			for i := range len(req) {
				if _, err := c.Write([]byte{req[i]}); err != nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
				if c.SetReadDeadline(time.Now().Add(time.Millisecond)) == nil {
					if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
						break
					}
				}
			}
			dropped.Add(1)
			lastDrop.Store(int64(time.Since(start)))
		}()
	}
	time.Sleep(time.Second)
	assert.NoError(t, probe(addr), "a probe while they dribble")
	require.Eventually(t, func() bool { return dropped.Load() == 200 }, 12*time.Second, 50*time.Millisecond)
	t.Logf("200 slow-loris clients all dropped after %s; server holds %d conns", time.Duration(lastDrop.Load()).Round(100*time.Millisecond), cl.open.Load())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestStalledScrapeBlocksNothing: a client that sends scrapes and never
// reads (pipelined requests until its socket fills up) does not hold its
// connection for ever, and never delays what a reconcile pass does with
// the metrics (the journal tail's Poll, the one lock a scrape shares).
func TestStalledScrapeBlocksNothing(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	m := metrics.New()
	tail := metrics.NewJournalTail(cache, m)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler(tail, slog.New(slog.DiscardHandler)))
	cl := serve(t, mux)
	addr := cl.Addr().String()
	c := dial(t, addr, 1)[0]
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
	stop := make(chan struct{})
	var sent atomic.Int64
	go func() {
		req := []byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := c.Write(req); err != nil && !isTimeout(err) {
				return
			} else if err == nil {
				sent.Add(1)
			}
		}
	}()
	t.Cleanup(func() { close(stop) })
	begin := time.Now()
	time.Sleep(2 * time.Second)
	var worst time.Duration
	for range 20 {
		start := time.Now()
		require.NoError(t, tail.Poll())
		worst = max(worst, time.Since(start))
	}
	t.Logf("a client never reading: %d scrapes sent; the reconcile loop's Poll took at most %s meanwhile", sent.Load(), worst)
	assert.Less(t, worst, 100*time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(cache, "x"), nil, 0o600)) // the cache dir stays usable
	ok := assert.Eventually(t, func() bool { return cl.open.Load() == 0 }, 20*time.Second, 100*time.Millisecond, "the stalled connection is closed (WriteTimeout)")
	if ok {
		t.Logf("the stalled connection was closed %s after the scrapes began", time.Since(begin).Round(100*time.Millisecond))
	}
}

// TestLimitListener: at most n connections are held; a Close frees a slot;
// Close of the listener ends a waiting Accept.
func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(ln, 2)
	dial(t, ln.Addr().String(), 3)
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	first, second := <-accepted, <-accepted
	require.NotNil(t, second)
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two are held")
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, first.Close())
	third := <-accepted
	require.NotNil(t, third, "a slot freed")
	require.NoError(t, l.Close())
	_, open := <-accepted
	assert.False(t, open, "Accept ends when the listener closes")
	for _, c := range []net.Conn{second, third} {
		require.NoError(t, c.Close())
	}
}
