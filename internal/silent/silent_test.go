package silent

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenNeverAnswers(t *testing.T) {
	addr, stop := Listen(t, "127.0.0.1:0")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_, err = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout(), "no answer: %v", err)

	stop()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
	_, err = c.Read(make([]byte, 1))
	assert.Error(t, err, "stop closed the connection")
	assert.False(t, err != nil && isTimeout(err), "closed, not timed out: %v", err)
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "and the listener")
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error) //nolint:errorlint // a read's error is the net.Error itself
	return ok && ne.Timeout()
}
