package agent

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// limitListener holds at most n accepted connections at once: Accept
// waits for a slot, a connection's Close frees it.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

var _ net.Listener = (*limitListener)(nil)

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
}

// Close stops a waiting Accept too.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// slotConn frees its slot once, at its first Close.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// idleShedder closes the oldest idle keep-alive connection when more than
// max are idle (http.Server's ConnState hook).
type idleShedder struct {
	max  int
	mu   sync.Mutex
	idle map[net.Conn]time.Time
}

func newIdleShedder(max int) *idleShedder {
	return &idleShedder{max: max, idle: map[net.Conn]time.Time{}}
}

func (s *idleShedder) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != http.StateIdle {
		delete(s.idle, c)
		return
	}
	s.idle[c] = time.Now()
	if len(s.idle) <= s.max {
		return
	}
	var oldest net.Conn
	var at time.Time
	for ic, t := range s.idle {
		if oldest == nil || t.Before(at) {
			oldest, at = ic, t
		}
	}
	delete(s.idle, oldest)
	_ = oldest.Close() // idle: no request of its to fail; its serving goroutine ends on the error
}
