// Package silent is a test helper: a TCP listener that accepts every
// connection and never answers, the way a server that is up but hung
// looks to its clients (a module proxy, an OTLP collector).
package silent

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Listen listens on addr ("127.0.0.1:0" for a free port) and holds every
// connection open without reading or writing. It returns the address and
// stop, which closes the listener and the connections; t.Cleanup calls it
// too.
func Listen(t testing.TB, addr string) (string, func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = l.Close()
			<-done
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				_ = c.Close()
			}
		})
	}
	t.Cleanup(stop)
	return l.Addr().String(), stop
}
