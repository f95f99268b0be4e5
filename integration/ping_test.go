package integration

import (
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// ping sends one ICMP echo request from the host to ip and waits up to
// timeout for its reply: a pod's kernel answers whatever runs in it, so a
// reply shows its interface, address, veth and the host's route to it work.
func ping(ip string, timeout time.Duration) error {
	dst := net.ParseIP(ip)
	if dst == nil || dst.To4() == nil {
		return fmt.Errorf("ping %q: not an IPv4 address", ip)
	}
	c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		return fmt.Errorf("ping %s: %w", ip, err)
	}
	defer func() { _ = c.Close() }()
	id, seq := os.Getpid()&0xffff, int(seq.Add(1))&0xffff
	msg, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("catena")}}).Marshal(nil)
	if err != nil {
		return fmt.Errorf("ping %s: %w", ip, err)
	}
	if _, err := c.WriteTo(msg, &net.IPAddr{IP: dst}); err != nil {
		return fmt.Errorf("ping %s: %w", ip, err)
	}
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("ping %s: %w", ip, err)
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("ping %s: no echo reply: %w", ip, err)
		}
		reply, err := icmp.ParseMessage(1, buf[:n]) // 1: ICMP for IPv4
		if err != nil || reply.Type != ipv4.ICMPTypeEchoReply || from.String() != dst.String() {
			continue // another host's or another test's message
		}
		if echo, ok := reply.Body.(*icmp.Echo); ok && echo.ID == id && echo.Seq == seq {
			return nil
		}
	}
}
