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
	if err := echo(c, dst, os.Getpid()&0xffff, int(seq.Add(1))&0xffff, []byte("catena"), timeout, make([]byte, 1500)); err != nil {
		return fmt.Errorf("ping %s: %w", ip, err)
	}
	return nil
}

// echo sends one echo request of id, seq and data to dst on c and waits up
// to timeout for its reply, skipping every other message (another host's,
// another test's); buf is the read buffer.
func echo(c *icmp.PacketConn, dst net.IP, id, seq int, data []byte, timeout time.Duration, buf []byte) error {
	msg, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: data}}).Marshal(nil)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(msg, &net.IPAddr{IP: dst}); err != nil {
		return err
	}
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("no echo reply: %w", err)
		}
		reply, err := icmp.ParseMessage(1, buf[:n]) // 1: ICMP for IPv4
		if err != nil || reply.Type != ipv4.ICMPTypeEchoReply || from.String() != dst.String() {
			continue // another host's or another test's message
		}
		if e, ok := reply.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq {
			return nil
		}
	}
}
